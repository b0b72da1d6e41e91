/* fuzz_grpc_status.c — the google.rpc.Status a gRPC server sends in grpc-status-details-bin,
 * as the agent's otlp_grpc exporter reads it for a RetryInfo
 * (agent/export/otlp_grpc.h agent_otlp_grpc_retry_delay()).
 *
 * Invariants checked: the delay is -1 (none) or 0..86400000 ms; every prefix of the input
 * reads without fault and gives a bounded delay too; the same bytes always give the same
 * delay. */
#include "export/otlp_grpc.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t d = agent_otlp_grpc_retry_delay(data, size);
	FUZZ_CHECK(d == -1 || (d >= 0 && d <= 86400 * 1000), "delay %lld", (long long)d);
	FUZZ_CHECK(agent_otlp_grpc_retry_delay(data, size) == d, "not deterministic");
	for (size_t n = size > 64 ? size - 64 : 0; n < size; n++) {
		int64_t p = agent_otlp_grpc_retry_delay(data, n);
		FUZZ_CHECK(p == -1 || (p >= 0 && p <= 86400 * 1000), "prefix %zu: delay %lld", n,
			   (long long)p);
	}
	return 0;
}
