# profleet-controller image: multi-stage, Debian 12 (the versions the project builds against).
#   docker build -f deploy/docker/controller.Dockerfile -t profleet/controller:0.1.0 .
# The build stage installs exactly scripts/install-deps.sh's packages; the runtime stage only
# the shared libraries the binary links (tests/deploy/check_chart.py checks them against the
# built binary) and runs as the unprivileged user profleet (uid 10001).
FROM debian:12-slim AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# Again with the sources: `npm ci` for the console's build (ui/package-lock.json).
RUN bash scripts/install-deps.sh \
	&& cmake -S . -B build/image -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPF_WERROR=ON \
	&& cmake --build build/image -j"$(nproc)" --target profleet-controller ui \
	&& strip --strip-debug build/image/controller/profleet-controller

FROM debian:12-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates \
		libwebsockets17 libwebsockets-evlib-uv libuv1 libprotobuf-c1 libssl3 libyaml-0-2 libsqlite3-0 libpq5 libjansson4 zlib1g libgrpc29 \
	&& rm -rf /var/lib/apt/lists/* \
	&& groupadd --system --gid 10001 profleet \
	&& useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/profleet \
		--shell /usr/sbin/nologin profleet \
	&& install -d -o 10001 -g 10001 -m 0700 /var/lib/profleet
COPY --from=build /src/build/image/controller/profleet-controller /usr/local/bin/profleet-controller
# The fleet console, where the controller looks for it (../share/profleet/ui beside the binary).
COPY --from=build /src/build/image/controller/ui /usr/local/share/profleet/ui
USER 10001:10001
WORKDIR /var/lib/profleet
EXPOSE 4320
VOLUME ["/var/lib/profleet"]
ENTRYPOINT ["/usr/local/bin/profleet-controller"]
CMD ["--listen", "0.0.0.0:4320", "--data-dir", "/var/lib/profleet"]
