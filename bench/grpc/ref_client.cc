// SPDX-License-Identifier: LGPL-2.1-or-later
//
// ref_client: the reference for bench/grpc: Debian's libgrpc++ sync client
// making unary Probe calls on ONE channel (one HTTP/2 connection), N calls
// split over T threads. Prints "median_us p99_us calls" for the run.
// Knows nothing of nodefs but csi.proto.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "csi.grpc.pb.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		std::fprintf(stderr, "usage: %s SOCKET_PATH CALLS THREADS\n", argv[0]);
		return 2;
	}
	std::string target = std::string("unix:") + argv[1];
	long calls = std::atol(argv[2]);
	int threads = std::atoi(argv[3]);
	auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
	auto stub = csi::v1::Identity::NewStub(channel);

	// Warm up: connect and settle.
	for (int i = 0; i < 200; i++) {
		grpc::ClientContext ctx;
		csi::v1::ProbeRequest req;
		csi::v1::ProbeResponse resp;
		grpc::Status st = stub->Probe(&ctx, req, &resp);
		if (!st.ok()) {
			std::fprintf(stderr, "Probe: %s\n", st.error_message().c_str());
			return 1;
		}
	}
	std::vector<std::vector<double>> lat(threads);
	std::vector<std::thread> ts;
	long per = calls / threads;
	for (int t = 0; t < threads; t++) {
		ts.emplace_back([&, t] {
			lat[t].reserve(per);
			for (long i = 0; i < per; i++) {
				grpc::ClientContext ctx;
				ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
				csi::v1::ProbeRequest req;
				csi::v1::ProbeResponse resp;
				auto t0 = std::chrono::steady_clock::now();
				grpc::Status st = stub->Probe(&ctx, req, &resp);
				auto t1 = std::chrono::steady_clock::now();
				if (!st.ok() || !resp.ready().value())
					std::abort();
				lat[t].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
			}
		});
	}
	for (auto &t : ts)
		t.join();
	std::vector<double> all;
	for (auto &v : lat)
		all.insert(all.end(), v.begin(), v.end());
	std::sort(all.begin(), all.end());
	std::printf("%.1f %.1f %zu\n", all[all.size() / 2], all[all.size() * 99 / 100], all.size());
	return 0;
}
