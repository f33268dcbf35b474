# syntax=docker/dockerfile:1
#
# Toolgate gateway image: a static, pure-Go binary (modernc SQLite, pgx; no
# cgo) on distroless, running as the unprivileged "nonroot" user (65532).
#
#   docker build -t toolgate/gateway:dev .
#   docker compose up --build            # gateway + PostgreSQL + Prometheus
#
# The baked-in /etc/toolgate/gateway.yaml is deploy/gateway.yaml (PostgreSQL
# at host "postgres"); mount your own config over it anywhere else.
#
# No HEALTHCHECK: distroless has no shell or HTTP client to run one. Probe
# /healthz and /readyz from the orchestrator (Kubernetes httpGet probes,
# a load balancer). See docs/deployment.md "Running with Docker Compose and
# PostgreSQL".

# Build stage. The tag follows go.mod's go directive (1.26.x); the official
# image sets GOTOOLCHAIN=local, so an older patch release would refuse to
# build rather than fetch a toolchain.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/toolgate-sandbox ./cmd/toolgate-sandbox
# The state folder the workspaces volume mounts on. A new named volume
# takes the ownership of the folder it is mounted on, so it must exist in
# the image, owned by nonroot (distroless has no shell to mkdir there).
RUN mkdir -p /out/state/workspaces

# Final stage.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /gateway
# The command jail's helper, found beside the gateway: a small binary that
# starts in ~1 ms where the gateway binary would take ~11 ms more per
# program (docs/security-model.md "Security model").
COPY --from=build /out/toolgate-sandbox /toolgate-sandbox
COPY deploy/gateway.yaml /etc/toolgate/gateway.yaml
COPY policies/ /etc/toolgate/policies/
# The demo tenant's seed (56 KB): copied into its empty workspace on first
# start, as `go run ./cmd/gateway` does. Drop it with the seed key for a
# production image.
COPY demo/workspaces/acme/ /etc/toolgate/seed/acme/
COPY --from=build --chown=65532:65532 /out/state /var/lib/toolgate
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/gateway"]
CMD ["serve", "--config", "/etc/toolgate/gateway.yaml"]
