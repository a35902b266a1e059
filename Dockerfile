# promptgauge in a container: a multi-stage build, then a slim non-root image holding the
# one binary (rustls: no OpenSSL needed; CA certificates for HTTPS endpoints).
#
#   docker build -t promptgauge .
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/work" -e OPENAI_API_KEY promptgauge run --base-url https://api.openai.com/v1 --model gpt-4o-mini
#
# (`--user` runs it as you, so it can write reports/ into the mounted folder.)
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY benches ./benches
RUN cargo build --release --locked --bin promptgauge

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 promptgauge
COPY --from=build /src/target/release/promptgauge /usr/local/bin/promptgauge
USER promptgauge
WORKDIR /work
ENTRYPOINT ["promptgauge"]
CMD ["--help"]
