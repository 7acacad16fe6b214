// SPDX-License-Identifier: LGPL-2.1-or-later
//
// identity_server: a minimal CSI Identity server on Debian's libgrpc++ (the
// reference implementation), for bench/grpc. It answers Probe (ready) and
// GetPluginInfo on the unix socket given as argv[1] until SIGTERM/SIGINT.
// Built from nodefs's csi/csi.proto; it knows nothing else of nodefs.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "csi.grpc.pb.h"

namespace {

class Identity final : public csi::v1::Identity::Service {
	grpc::Status GetPluginInfo(grpc::ServerContext *, const csi::v1::GetPluginInfoRequest *,
				   csi::v1::GetPluginInfoResponse *resp) override
	{
		resp->set_name("bench.csi.nodefs.test");
		resp->set_vendor_version("1.0.0");
		return grpc::Status::OK;
	}
	grpc::Status Probe(grpc::ServerContext *, const csi::v1::ProbeRequest *,
			   csi::v1::ProbeResponse *resp) override
	{
		resp->mutable_ready()->set_value(true);
		return grpc::Status::OK;
	}
};

volatile std::sig_atomic_t stop_requested = 0;

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
		return 2;
	}
	std::string path = argv[1];
	unlink(path.c_str());
	Identity service;
	grpc::ServerBuilder b;
	b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
	b.RegisterService(&service);
	std::unique_ptr<grpc::Server> server = b.BuildAndStart();
	if (!server) {
		std::fprintf(stderr, "cannot listen on %s\n", path.c_str());
		return 1;
	}
	std::signal(SIGTERM, [](int) { stop_requested = 1; });
	std::signal(SIGINT, [](int) { stop_requested = 1; });
	while (!stop_requested)
		usleep(50000);
	server->Shutdown();
	unlink(path.c_str());
	return 0;
}
