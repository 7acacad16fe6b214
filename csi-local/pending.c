/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pending: the controller and node services, not yet served (UNIMPLEMENTED). */
#include "grpc.h"
#include "plugin.h"

int rpc_create_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_delete_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_validate_volume_capabilities(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_list_volumes(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_get_capacity(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_controller_expand_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_create_snapshot(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_delete_snapshot(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_list_snapshots(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_stage_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_unstage_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_publish_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_unpublish_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_get_volume_stats(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}

int rpc_node_expand_volume(struct plugin *p, const ProtobufCMessage *req, struct arena *a, ProtobufCMessage **ret, struct rstat *st)
{
	return rfail(st, GRPC_UNIMPLEMENTED, "not yet");
}
