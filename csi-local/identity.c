/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * identity: the Identity service and the other answers that depend on
 * nothing but the plugin's options (capabilities, NodeGetInfo). They run
 * on the loop thread: no lock, no disk, no records.
 */
#include <string.h>

#include "grpc.h"
#include "nodefs-config.h"
#include "plugin.h"

int rpc_get_plugin_info(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
			ProtobufCMessage **ret, struct rstat *st)
{
	Csi__V1__GetPluginInfoResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__GetPluginInfoResponse__ManifestEntry *e = arena_alloc(a, sizeof(*e));
	Csi__V1__GetPluginInfoResponse__ManifestEntry **ev = arena_alloc(a, sizeof(*ev));

	if (!r || !e || !ev)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__get_plugin_info_response__init(r);
	csi__v1__get_plugin_info_response__manifest_entry__init(e);
	r->name = PLUGIN_NAME;
	r->vendor_version = NODEFS_VERSION;
	e->key = "backing";
	e->value = (char *)backing_to_string(p->backing);
	ev[0] = e;
	r->n_manifest = 1;
	r->manifest = ev;
	*ret = &r->base;
	return GRPC_OK;
}

int rpc_get_plugin_capabilities(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
				ProtobufCMessage **ret, struct rstat *st)
{
	Csi__V1__GetPluginCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__PluginCapability *c = arena_alloc(a, 2 * sizeof(*c));
	Csi__V1__PluginCapability__Service *svc = arena_alloc(a, sizeof(*svc));
	Csi__V1__PluginCapability__VolumeExpansion *ex = arena_alloc(a, sizeof(*ex));
	Csi__V1__PluginCapability **cv = arena_alloc(a, 2 * sizeof(*cv));

	if (!r || !c || !svc || !ex || !cv)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__get_plugin_capabilities_response__init(r);
	csi__v1__plugin_capability__init(&c[0]);
	csi__v1__plugin_capability__init(&c[1]);
	csi__v1__plugin_capability__service__init(svc);
	csi__v1__plugin_capability__volume_expansion__init(ex);
	svc->type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE;
	c[0].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	c[0].service = svc;
	ex->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
	c[1].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
	c[1].volume_expansion = ex;
	cv[0] = &c[0];
	cv[1] = &c[1];
	r->n_capabilities = 2;
	r->capabilities = cv;
	*ret = &r->base;
	return GRPC_OK;
}

int rpc_probe(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
	      ProtobufCMessage **ret, struct rstat *st)
{
	Csi__V1__ProbeResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__BoolValue *b = arena_alloc(a, sizeof(*b));

	if (!r || !b)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__probe_response__init(r);
	csi__v1__bool_value__init(b);
	/* Records are loaded and recovered before the socket listens. */
	b->value = true;
	r->ready = b;
	*ret = &r->base;
	return GRPC_OK;
}

int rpc_controller_get_capabilities(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
				    ProtobufCMessage **ret, struct rstat *st)
{
	static const int types[] = {
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME,
	};
	enum { N = sizeof(types) / sizeof(types[0]) };
	Csi__V1__ControllerGetCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__ControllerServiceCapability *c = arena_alloc(a, N * sizeof(*c));
	Csi__V1__ControllerServiceCapability__RPC *rpc = arena_alloc(a, N * sizeof(*rpc));
	Csi__V1__ControllerServiceCapability **cv = arena_alloc(a, N * sizeof(*cv));

	if (!r || !c || !rpc || !cv)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__controller_get_capabilities_response__init(r);
	for (int i = 0; i < N; i++) {
		csi__v1__controller_service_capability__init(&c[i]);
		csi__v1__controller_service_capability__rpc__init(&rpc[i]);
		rpc[i].type = types[i];
		c[i].type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c[i].rpc = &rpc[i];
		cv[i] = &c[i];
	}
	r->n_capabilities = N;
	r->capabilities = cv;
	*ret = &r->base;
	return GRPC_OK;
}

int rpc_node_get_capabilities(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
			      ProtobufCMessage **ret, struct rstat *st)
{
	static const int types[] = {
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
		CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	};
	enum { N = sizeof(types) / sizeof(types[0]) };
	Csi__V1__NodeGetCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__NodeServiceCapability *c = arena_alloc(a, N * sizeof(*c));
	Csi__V1__NodeServiceCapability__RPC *rpc = arena_alloc(a, N * sizeof(*rpc));
	Csi__V1__NodeServiceCapability **cv = arena_alloc(a, N * sizeof(*cv));

	if (!r || !c || !rpc || !cv)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__node_get_capabilities_response__init(r);
	for (int i = 0; i < N; i++) {
		csi__v1__node_service_capability__init(&c[i]);
		csi__v1__node_service_capability__rpc__init(&rpc[i]);
		rpc[i].type = types[i];
		c[i].type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c[i].rpc = &rpc[i];
		cv[i] = &c[i];
	}
	r->n_capabilities = N;
	r->capabilities = cv;
	*ret = &r->base;
	return GRPC_OK;
}

int rpc_node_get_info(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
		      ProtobufCMessage **ret, struct rstat *st)
{
	Csi__V1__NodeGetInfoResponse *r = arena_alloc(a, sizeof(*r));

	if (!r)
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__node_get_info_response__init(r);
	r->node_id = p->node_id;
	*ret = &r->base;
	return GRPC_OK;
}
