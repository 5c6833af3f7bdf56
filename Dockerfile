# A small static image of mysqlctl for the in-cluster watch (manifests/watch/):
#   docker build -t mysqlctl:latest .
# Without a registry, `make image` builds the same image from bin/mysqlctl with buildah
# (Dockerfile.local, FROM scratch).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mysqlctl ./cmd/mysqlctl

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/mysqlctl /mysqlctl
USER 65532:65532
ENTRYPOINT ["/mysqlctl"]
