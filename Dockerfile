# keda-rs container images: one build stage, one small non-root image per binary.
#
#   docker build --target operator          -t keda-rs/keda-rs-operator:0.1.0 .
#   docker build --target metrics-apiserver -t keda-rs/keda-rs-metrics-apiserver:0.1.0 .
#   docker build --target activator         -t keda-rs/keda-rs-activator:0.1.0 .
#   docker build --target webhook           -t keda-rs/keda-rs-webhook:0.1.0 .
#
# The names are the ones config/ deploys (a test in tests/e2e/tests/manifests.rs keeps them in
# step). Each image is distroless (glibc, CA certificates, no shell, no package manager) plus one
# stripped binary and the shared libraries it links, and runs as user 65532 (nonroot).

# ---- build -------------------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Release binaries of the four processes (and keda-rs-certs, which the metrics-apiserver image
# carries). rdkafka's bundled librdkafka builds with the image's gcc, make and perl.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p keda-operator -p keda-metrics-apiserver -p keda-activator -p keda-webhook \
 && mkdir -p /out/bin \
 && cp target/release/keda-operator target/release/keda-metrics-apiserver \
       target/release/keda-rs-certs target/release/keda-activator target/release/keda-webhook \
       /out/bin/ \
 && strip /out/bin/*
# The shared libraries beyond glibc and libgcc (which distroless/cc has) that each binary links,
# under their own paths: OpenSSL and zlib for librdkafka in the operator and the activator.
RUN for bin in operator metrics-apiserver activator; do \
      mkdir -p /out/libs/$bin; \
      ldd /out/bin/keda-$bin | awk '/=> \// {print $3}' \
        | grep -E '/lib(ssl|crypto|z)\.so' \
        | xargs -r cp --parents -L -t /out/libs/$bin; \
    done

# ---- images ------------------------------------------------------------------------------------
FROM gcr.io/distroless/cc-debian12:nonroot AS operator
COPY --from=build /out/libs/operator/ /
COPY --from=build /out/bin/keda-operator /usr/local/bin/keda-operator
USER 65532:65532
EXPOSE 8080 8081 9666
ENTRYPOINT ["/usr/local/bin/keda-operator"]

FROM gcr.io/distroless/cc-debian12:nonroot AS metrics-apiserver
COPY --from=build /out/libs/metrics-apiserver/ /
COPY --from=build /out/bin/keda-metrics-apiserver /usr/local/bin/keda-metrics-apiserver
COPY --from=build /out/bin/keda-rs-certs /usr/local/bin/keda-rs-certs
USER 65532:65532
EXPOSE 6443 8080
ENTRYPOINT ["/usr/local/bin/keda-metrics-apiserver"]

FROM gcr.io/distroless/cc-debian12:nonroot AS activator
COPY --from=build /out/libs/activator/ /
COPY --from=build /out/bin/keda-activator /usr/local/bin/keda-activator
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/keda-activator"]

FROM gcr.io/distroless/cc-debian12:nonroot AS webhook
COPY --from=build /out/bin/keda-webhook /usr/local/bin/keda-webhook
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/keda-webhook"]
