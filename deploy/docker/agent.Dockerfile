# profleet-agent image: multi-stage, Debian 12. The eBPF program is compiled against the BTF of
# the build host (/sys/kernel/btf/vmlinux, visible in build containers); CO-RE relocates it on
# the nodes.
#   docker build -f deploy/docker/agent.Dockerfile -t profleet/agent:0.1.0 .
# Runs as root inside the pod with only the capabilities the chart adds (BPF, PERFMON,
# SYS_PTRACE, SYS_RESOURCE, DAC_READ_SEARCH), hostPID and read-only host mounts.
FROM debian:12-slim AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build/image -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPF_WERROR=ON \
	&& cmake --build build/image -j"$(nproc)" --target profleet-agent \
	&& strip --strip-debug build/image/agent/profleet-agent

FROM debian:12-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates \
		libwebsockets17 libprotobuf-c1 libssl3 libyaml-0-2 libjansson4 zlib1g \
		libbpf1 libelf1 libdw1 libxxhash0 libcurl4 libgrpc29 \
	&& rm -rf /var/lib/apt/lists/* \
	&& install -d -m 0700 /var/lib/profleet-agent
COPY --from=build /src/build/image/agent/profleet-agent /usr/local/bin/profleet-agent
WORKDIR /var/lib/profleet-agent
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/profleet-agent"]
CMD ["--state-dir", "/var/lib/profleet-agent"]
