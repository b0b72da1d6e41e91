/* opamp_codec_int.h — private to proto/codec/opamp_codec*.c: the short names of the generated
 * OpAMP types and the wire types the hand-written fast paths use. opamp_codec.c decodes and
 * frames, opamp_codec_encode.c encodes. */
#ifndef PF_PROTO_OPAMP_CODEC_INT_H
#define PF_PROTO_OPAMP_CODEC_INT_H

#include "opamp/v1/anyvalue.pb-c.h"
#include "opamp/v1/opamp.pb-c.h"

/* Short local names for the generated types (proto/codec/ is the only place they appear). */
typedef Opamp__Proto__V1__AgentToServer pb_a2s;
typedef Opamp__Proto__V1__ServerToAgent pb_s2a;
typedef Opamp__Proto__V1__AnyValue pb_anyvalue;
typedef Opamp__Proto__V1__KeyValue pb_kv;
typedef Opamp__Proto__V1__ComponentHealth pb_health;
typedef Opamp__Proto__V1__ComponentHealth__ComponentHealthMapEntry pb_health_entry;
typedef Opamp__Proto__V1__AgentConfigMap pb_config_map;
typedef Opamp__Proto__V1__AgentConfigMap__ConfigMapEntry pb_config_entry;
typedef Opamp__Proto__V1__AgentConfigFile pb_config_file;
typedef Opamp__Proto__V1__CustomMessage pb_custom_message;
typedef Opamp__Proto__V1__CustomCapabilities pb_custom_caps;

/* Wire types (protobuf encoding spec: tag = field << 3 | wire type), for the hand-written
 * fast paths. */
enum { WT_VARINT = 0, WT_LEN = 2 };

#endif
