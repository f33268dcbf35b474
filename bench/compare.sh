#!/usr/bin/env bash
# bench/compare.sh — side-by-side load comparison (issue 5):
#   A  opa run --server   POST /v1/data/toolgate/authz/decision  {"input": <request document>}
#   B  Toolgate           POST /v1/tools/read-file/decisions      (full path, durable SQLite audit)
#   C  Toolgate           POST /v1/tools/read-file/calls          (full path including the read)
# Same policy pack and data (policies/), same load generator (bench/loadgen),
# same logical request, all on 127.0.0.1. For each concurrency the targets
# run interleaved A, B, C (ROUNDS times) so machine drift hits all of them.
#
# Usage (from anywhere in the repository):
#   bench/compare.sh
#   DURATION=5s WARMUP=1s CONCURRENCY="1 16 64" RATES="300 1000" bench/compare.sh
#
# Knobs (environment):
#   DURATION     measured time per cell            (default 10s)
#   WARMUP       unmeasured warm-up per cell       (default 2s)
#   CONCURRENCY  closed-loop client counts         (default "1 16 64")
#   RATES        open-loop rates in req/s, "" none (default "300 1000")
#   RATE_C       max in flight for open loop       (default 64)
#   ROUNDS       interleaved rounds per cell       (default 1)
#   KEEP=1       keep the temp dir (logs, audit db) for inspection
set -euo pipefail

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONCURRENCY=${CONCURRENCY:-"1 16 64"}
RATES=${RATES-"300 1000"}
RATE_C=${RATE_C:-64}
ROUNDS=${ROUNDS:-1}

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
for cmd in curl jq awk; do
	command -v "$cmd" >/dev/null || { echo "compare.sh: needs $cmd" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench.XXXXXX")
opa_pid="" gw_pid=""
cleanup() {
	[ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
	[ -n "$opa_pid" ] && kill "$opa_pid" 2>/dev/null && wait "$opa_pid" 2>/dev/null
	if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "== $*" >&2; }

# free_port asks the kernel for an unused loopback port.
free_port() {
	if command -v python3 >/dev/null; then
		python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
	else
		echo $((20000 + RANDOM % 20000))
	fi
}

# wait_http URL: poll until it answers 200 (30 s at most).
wait_http() {
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "compare.sh: $1 did not come up" >&2
	return 1
}

log "building gateway, opa and loadgen into $tmp"
go build -o "$tmp/gateway" ./cmd/gateway
go build -o "$tmp/opa" github.com/open-policy-agent/opa
go build -o "$tmp/loadgen" ./bench/loadgen

opa_port=$(free_port)
gw_port=$(free_port)
while [ "$gw_port" = "$opa_port" ]; do gw_port=$(free_port); done

mkdir -p "$tmp/ws/docs"
printf '# Guide\n\nA small file for the benchmark.\n\n- one\n- two\n- three\n' >"$tmp/ws/docs/guide.md"
cat >"$tmp/gateway.yaml" <<YAML
listen: "127.0.0.1:$gw_port"
policy:
  dir: $repo/policies
audit:
  driver: sqlite
  dsn: $tmp/audit.db
auth:
  jwt:
    hs256_secret_file: $tmp/jwt-secret
    tenant_claim: tenant
    roles_claim: roles
  api_keys: []
tenants:
  acme:
    workspace: $tmp/ws
tools:
  builtin: [read-file]
YAML

log "starting opa on 127.0.0.1:$opa_port (decision logging off, telemetry off)"
"$tmp/opa" run --server --addr "127.0.0.1:$opa_port" --disable-telemetry \
	--log-level error "$repo/policies" >"$tmp/opa.log" 2>&1 &
opa_pid=$!
log "starting gateway on 127.0.0.1:$gw_port"
"$tmp/gateway" serve --config "$tmp/gateway.yaml" >"$tmp/gateway.log" 2>&1 &
gw_pid=$!
wait_http "http://127.0.0.1:$opa_port/health"
wait_http "http://127.0.0.1:$gw_port/readyz"

token=$("$tmp/gateway" token --config "$tmp/gateway.yaml" --tenant acme --sub bench \
	--roles developer,auditor --ttl 2h)
auth="Authorization: Bearer $token"
body='{"arguments":{"path":"docs/guide.md"},"session_id":"bench"}'
gw="http://127.0.0.1:$gw_port"
opa="http://127.0.0.1:$opa_port"

# The request document OPA gets is the one the gateway itself built for the
# same call: take it from the audit event of one decision.
call_id=$(curl -fsS -H "$auth" -H 'Content-Type: application/json' -d "$body" \
	"$gw/v1/tools/read-file/decisions" | jq -r .call_id)
curl -fsS -H "$auth" "$gw/v1/audit/events?call_id=$call_id&limit=1" |
	jq -c '{input: .events[0].input}' >"$tmp/opa-input.json"
jq -e '.input.resources[0].path == "docs/guide.md"' "$tmp/opa-input.json" >/dev/null ||
	{ echo "compare.sh: unexpected request document: $(cat "$tmp/opa-input.json")" >&2; exit 1; }
# Sanity: both sides must allow the call, or we would be timing denials.
opa_allow=$(curl -fsS -d @"$tmp/opa-input.json" "$opa/v1/data/toolgate/authz/decision" | jq -r .result.allow)
gw_outcome=$(curl -fsS -H "$auth" -H 'Content-Type: application/json' -d "$body" \
	"$gw/v1/tools/read-file/calls" | jq -r .outcome)
[ "$opa_allow" = true ] && [ "$gw_outcome" = ok ] ||
	{ echo "compare.sh: sanity check failed (opa allow=$opa_allow, gateway outcome=$gw_outcome)" >&2; exit 1; }

results="$tmp/results.tsv"
: >"$results"

# cell TARGET LOADGEN-ARGS...: one run, appended to $results.
cell() {
	local target=$1
	shift
	local args
	case $target in
	A) args=(-target "$opa" -path /v1/data/toolgate/authz/decision -body "$tmp/opa-input.json" -pid "$opa_pid") ;;
	B) args=(-target "$gw" -path /v1/tools/read-file/decisions -body-json "$body" -header "$auth" -pid "$gw_pid") ;;
	C) args=(-target "$gw" -path /v1/tools/read-file/calls -body-json "$body" -header "$auth" -pid "$gw_pid") ;;
	esac
	log "$target $*"
	"$tmp/loadgen" "${args[@]}" -duration "$DURATION" -warmup "$WARMUP" \
		-label "$target" -format tsv "$@" >>"$results"
}

for _ in $(seq "$ROUNDS"); do
	for c in $CONCURRENCY; do
		for t in A B C; do cell "$t" -c "$c"; done
	done
	for r in $RATES; do
		for t in A B C; do cell "$t" -c "$RATE_C" -rate "$r"; done
	done
done

echo
echo "Toolgate vs opa run --server — $(nproc) cores, $(go env GOVERSION), DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS"
echo "A = OPA /v1/data/toolgate/authz/decision   B = Toolgate /decisions   C = Toolgate /calls (read-file, docs/guide.md)"
echo
# Columns of loadgen -format tsv (loadgen's TSVHeader):
# label mode c rate requests errors rps p50 p90 p99 p999 max rss_kib.
awk -F'\t' '
BEGIN {
	printf "%-6s %-16s %9s %7s %9s %9s %9s %9s %9s %8s\n",
		"target", "load", "req/s", "errors", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "RSS MiB"
}
{
	load = $2 == "closed" ? "closed c=" $3 : sprintf("open %d/s c≤%d", $4, $3)
	printf "%-6s %-16s %9.1f %7d %9d %9d %9d %9d %9d %8.1f\n",
		$1, load, $7, $6, $8, $9, $10, $11, $12, $13 / 1024
}' "$results"

# Ratios per closed-loop concurrency (averaged over rounds): throughput and p99.
echo
echo "Ratios (closed loop; >1 throughput = faster than OPA, <1 p99 = lower tail than OPA)"
awk -F'\t' '
$2 == "closed" {
	rps[$1, $3] += $7; p99[$1, $3] += $10; cnt[$1, $3]++
	if (!($3 in seen)) { seen[$3] = 1; order[++k] = $3 }
}
END {
	printf "%-8s %10s %10s %10s %10s %10s %10s\n", "c", "A req/s", "B/A req/s", "C/A req/s", "A p99 µs", "B/A p99", "C/A p99"
	for (i = 1; i <= k; i++) {
		c = order[i]
		a = rps["A", c] / cnt["A", c]; ap = p99["A", c] / cnt["A", c]
		b = rps["B", c] / cnt["B", c]; bp = p99["B", c] / cnt["B", c]
		x = rps["C", c] / cnt["C", c]; xp = p99["C", c] / cnt["C", c]
		printf "%-8s %10.1f %10.2f %10.2f %10d %10.2f %10.2f\n", c, a, b / a, x / a, ap, bp / ap, xp / ap
	}
}' "$results"
[ -z "$RATES" ] || echo "Open loop: latency measured from each request's scheduled send time (no coordinated omission)."
