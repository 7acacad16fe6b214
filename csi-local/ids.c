/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ids: the ids a request names, looked up before any other field is
 * checked, as the CSI spec's error tables order it: an unknown volume or
 * snapshot is NOT_FOUND whatever else is wrong with the request. An id
 * that is empty or not an id at all is INVALID_ARGUMENT (a missing field,
 * or bytes that cannot name anything). The calls an unknown id answers
 * otherwise (DeleteVolume and DeleteSnapshot: OK; ListSnapshots: an empty
 * list) are left to their handlers. The handlers look again under the
 * lock: an object may go between the two looks.
 *
 * Must not know: the wire, the backings.
 */
#include <string.h>

#include "grpc.h"
#include "plugin.h"

enum what { VOL, SNAP };

static int known(struct plugin *p, enum what w, const char *field, const char *id, struct rstat *st)
{
	int code = check_id(field, id, st);

	if (code)
		return code;
	pthread_mutex_lock(&p->mu);
	bool found = w == VOL ? store_vol(p, id) != NULL : store_snap(p, id) != NULL;
	pthread_mutex_unlock(&p->mu);
	if (!found)
		return rfail(st, GRPC_NOT_FOUND, "%s %s does not exist", w == VOL ? "volume" : "snapshot", id);
	return GRPC_OK;
}

#define IS(m, name) ((m)->descriptor == &csi__v1__##name##_request__descriptor)

int ids_known(struct plugin *p, const ProtobufCMessage *m, struct rstat *st)
{
	if (IS(m, create_volume)) {
		const Csi__V1__VolumeContentSource *cs = ((const Csi__V1__CreateVolumeRequest *)m)->volume_content_source;

		if (cs && cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT)
			return known(p, SNAP, "volume_content_source.snapshot.snapshot_id", cs->snapshot->snapshot_id, st);
		if (cs && cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME)
			return known(p, VOL, "volume_content_source.volume.volume_id", cs->volume->volume_id, st);
		return GRPC_OK;
	}
	if (IS(m, create_snapshot))
		return known(p, VOL, "source_volume_id", ((const Csi__V1__CreateSnapshotRequest *)m)->source_volume_id, st);
#define VOLID(name, T) \
	if (IS(m, name)) \
		return known(p, VOL, "volume_id", ((const T *)m)->volume_id, st)
	VOLID(validate_volume_capabilities, Csi__V1__ValidateVolumeCapabilitiesRequest);
	VOLID(controller_expand_volume, Csi__V1__ControllerExpandVolumeRequest);
	VOLID(controller_get_volume, Csi__V1__ControllerGetVolumeRequest);
	VOLID(controller_modify_volume, Csi__V1__ControllerModifyVolumeRequest);
	VOLID(node_stage_volume, Csi__V1__NodeStageVolumeRequest);
	VOLID(node_unstage_volume, Csi__V1__NodeUnstageVolumeRequest);
	VOLID(node_publish_volume, Csi__V1__NodePublishVolumeRequest);
	VOLID(node_unpublish_volume, Csi__V1__NodeUnpublishVolumeRequest);
	VOLID(node_get_volume_stats, Csi__V1__NodeGetVolumeStatsRequest);
	VOLID(node_expand_volume, Csi__V1__NodeExpandVolumeRequest);
#undef VOLID
	return GRPC_OK;
}
