#!/usr/bin/env bash
# bench/compare.sh — side-by-side load comparison (issue 5):
#   A   opa run --server   POST /v1/data/toolgate/authz/decision  {"input": <request document>}
#   B   Toolgate           POST /v1/tools/read-file/decisions      (full path, durable SQLite audit)
#   C   Toolgate           POST /v1/tools/read-file/calls          (full path including the read)
#   B0  B on a second gateway with the decision cache off (policy.decision_cache: 0)
#   C0  C on that gateway
#   D   bench/directread: the same read done directly behind a bare HTTP handler
# Same policy pack and data (a copy of policies/), same load generator
# (bench/loadgen), same logical request, all on 127.0.0.1. For each
# concurrency the targets run interleaved (ROUNDS times) so machine drift
# hits all of them. Then three targeted phases:
#   profile  CPU profiles of the gateway during B, C and B0 at 16 clients (pprof
#            on a loopback debug listener): shares of SQLite, OPA, JSON, GC,
#            the tool and Prometheus metrics
#   reload   B at 16 clients while a 1,000-rule module is added to the
#            policy folder: time until the new revision serves, failed requests
#   soak     C at 64 clients for SOAK: RSS every 5 s, growth first→last
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
#   SOAK         soak duration, "" to skip          (default 60s)
#   PHASES       which targeted phases to run       (default "profile reload soak")
#   PACK         "shipped" (a copy of policies/) or "simple" (a few simple
#                rules, written below)                  (default shipped)
#   KEEP=1       keep the temp dir (logs, audit db) for inspection
set -euo pipefail

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONCURRENCY=${CONCURRENCY:-"1 16 64"}
RATES=${RATES-"300 1000"}
RATE_C=${RATE_C:-64}
ROUNDS=${ROUNDS:-1}
SOAK=${SOAK-60s}
PACK=${PACK:-shipped}
PHASES=${PHASES-"profile reload soak"}

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
for cmd in curl jq awk sed; do
	command -v "$cmd" >/dev/null || { echo "compare.sh: needs $cmd" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-bench.XXXXXX")
opa_pid="" gw_pid="" gw0_pid="" dr_pid=""
cleanup() {
	for p in $gw_pid $gw0_pid $opa_pid $dr_pid; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
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

log "building gateway, opa, loadgen and directread into $tmp"
go build -o "$tmp/gateway" ./cmd/gateway
go build -o "$tmp/opa" github.com/open-policy-agent/opa
go build -o "$tmp/loadgen" ./bench/loadgen
go build -o "$tmp/directread" ./bench/directread
go build -o "$tmp/fsynclat" ./bench/fsynclat

opa_port=$(free_port)
gw_port=$(free_port)
gw0_port=$(free_port)
pprof_port=$(free_port)
pprof0_port=$(free_port)

mkdir -p "$tmp/ws/docs"
printf '# Guide\n\nA small file for the benchmark.\n\n- one\n- two\n- three\n' >"$tmp/ws/docs/guide.md"
case $PACK in
shipped) cp -R "$repo/policies" "$tmp/policies" ;;
simple)
	# A few simple rules: developers may use read-file, reads under docs/
	# are allowed, nothing is masked. OPA and the gateways load the same.
	mkdir -p "$tmp/policies"
	cat >"$tmp/policies/availability.rego" <<'REGO'
package toolgate.availability

default allow := false

allow if {
	input.tool.name == "read-file"
	"developer" in input.principal.roles
}
REGO
	cat >"$tmp/policies/authz.rego" <<'REGO'
package toolgate.authz

default decision := {"allow": false, "reasons": ["not a read under docs/"]}

decision := {"allow": true, "reasons": ["reads under docs/ are allowed"]} if {
	input.tool.name == "read-file"
	count(input.resources) > 0
	every r in input.resources {
		r.type == "file"
		r.access == "read"
		startswith(r.path, "docs/")
	}
}
REGO
	;;
*) echo "compare.sh: PACK must be shipped or simple, got $PACK" >&2; exit 2 ;;
esac

# gateway_config NAME PORT EXTRA-POLICY-YAML EXTRA-YAML
gateway_config() {
	cat >"$tmp/$1.yaml" <<YAML
listen: "127.0.0.1:$2"
policy:
  dir: $tmp/policies
$3
audit:
  driver: sqlite
  dsn: $tmp/$1-audit.db
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
$4
YAML
}
gateway_config gateway "$gw_port" "" "debug:
  pprof_listen: \"127.0.0.1:$pprof_port\""
gateway_config gateway0 "$gw0_port" "  decision_cache: 0" "debug:
  pprof_listen: \"127.0.0.1:$pprof0_port\""

log "starting opa on 127.0.0.1:$opa_port (decision logging off, telemetry off)"
"$tmp/opa" run --server --addr "127.0.0.1:$opa_port" --disable-telemetry \
	--log-level error "$repo/policies" >"$tmp/opa.log" 2>&1 &
opa_pid=$!
log "starting gateways on 127.0.0.1:$gw_port (decision cache on) and :$gw0_port (off)"
"$tmp/gateway" serve --config "$tmp/gateway.yaml" >"$tmp/gateway.log" 2>&1 &
gw_pid=$!
wait_http "http://127.0.0.1:$gw_port/readyz" # the first gateway creates the JWT secret
"$tmp/gateway" serve --config "$tmp/gateway0.yaml" >"$tmp/gateway0.log" 2>&1 &
gw0_pid=$!
"$tmp/directread" -file "$tmp/ws/docs/guide.md" >"$tmp/directread.addr" 2>"$tmp/directread.log" &
dr_pid=$!
wait_http "http://127.0.0.1:$opa_port/health"
wait_http "http://127.0.0.1:$gw0_port/readyz"
for _ in $(seq 100); do [ -s "$tmp/directread.addr" ] && break; sleep 0.1; done
dr="http://$(cat "$tmp/directread.addr")"
wait_http "$dr/health"

token=$("$tmp/gateway" token --config "$tmp/gateway.yaml" --tenant acme --sub bench \
	--roles developer,auditor --ttl 2h)
admin=$("$tmp/gateway" token --config "$tmp/gateway.yaml" --tenant acme --sub bench-admin \
	--roles policy-admin --ttl 2h)
auth="Authorization: Bearer $token"
body='{"arguments":{"path":"docs/guide.md"},"session_id":"bench"}'
gw="http://127.0.0.1:$gw_port"
gw0="http://127.0.0.1:$gw0_port"
opa="http://127.0.0.1:$opa_port"

# The request document OPA gets is the one the gateway itself built for the
# same call: take it from the audit event of one decision.
call_id=$(curl -fsS -H "$auth" -H 'Content-Type: application/json' -d "$body" \
	"$gw/v1/tools/read-file/decisions" | jq -r .call_id)
curl -fsS -H "$auth" "$gw/v1/audit/events?call_id=$call_id&limit=1" |
	jq -c '{input: .events[0].input}' >"$tmp/opa-input.json"
jq -e '.input.resources[0].path == "docs/guide.md"' "$tmp/opa-input.json" >/dev/null ||
	{ echo "compare.sh: unexpected request document: $(cat "$tmp/opa-input.json")" >&2; exit 1; }
# Sanity: every side must allow the call, or we would be timing denials.
opa_allow=$(curl -fsS -d @"$tmp/opa-input.json" "$opa/v1/data/toolgate/authz/decision" | jq -r .result.allow)
gw_outcome=$(curl -fsS -H "$auth" -H 'Content-Type: application/json' -d "$body" \
	"$gw/v1/tools/read-file/calls" | jq -r .outcome)
gw0_outcome=$(curl -fsS -H "$auth" -H 'Content-Type: application/json' -d "$body" \
	"$gw0/v1/tools/read-file/calls" | jq -r .outcome)
dr_ok=$(curl -fsS -H 'Content-Type: application/json' -d "$body" "$dr/read" | jq -r 'has("content")')
[ "$opa_allow" = true ] && [ "$gw_outcome" = ok ] && [ "$gw0_outcome" = ok ] && [ "$dr_ok" = true ] ||
	{ echo "compare.sh: sanity check failed (opa allow=$opa_allow, gateway=$gw_outcome, gateway0=$gw0_outcome, direct=$dr_ok)" >&2; exit 1; }

results="$tmp/results.tsv"
: >"$results"

# target_args TARGET: the loadgen arguments of a target.
target_args() {
	case $1 in
	A) echo "-target $opa -path /v1/data/toolgate/authz/decision -body $tmp/opa-input.json -pid $opa_pid" ;;
	B) echo "-target $gw -path /v1/tools/read-file/decisions -pid $gw_pid" ;;
	B0) echo "-target $gw0 -path /v1/tools/read-file/decisions -pid $gw0_pid" ;;
	C) echo "-target $gw -path /v1/tools/read-file/calls -pid $gw_pid" ;;
	C0) echo "-target $gw0 -path /v1/tools/read-file/calls -pid $gw0_pid" ;;
	D) echo "-target $dr -path /read -pid $dr_pid" ;;
	esac
}

# load TARGET LOADGEN-ARGS...: one loadgen run against TARGET (tsv line on stdout).
load() {
	local target=$1
	shift
	local extra=()
	case $target in
	B | B0 | C | C0) extra=(-body-json "$body" -header "$auth") ;;
	D) extra=(-body-json "$body") ;;
	esac
	# shellcheck disable=SC2046 # target_args is a word list by design
	"$tmp/loadgen" $(target_args "$target") "${extra[@]}" -label "$target" -format tsv "$@"
}

# cell TARGET LOADGEN-ARGS...: one measured run, appended to $results.
cell() {
	log "$*"
	load "$@" -duration "$DURATION" -warmup "$WARMUP" >>"$results"
}

for _ in $(seq "$ROUNDS"); do
	for c in $CONCURRENCY; do
		for t in A B B0 C C0 D; do cell "$t" -c "$c"; done
	done
	for r in $RATES; do
		for t in A B C; do cell "$t" -c "$RATE_C" -rate "$r"; done
	done
done

echo
echo "Toolgate vs opa run --server — $(nproc) cores, $(go env GOVERSION), PACK=$PACK DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS"
echo "A = OPA /v1/data/toolgate/authz/decision   B = Toolgate /decisions   C = Toolgate /calls (read-file, docs/guide.md)"
echo "B0, C0 = the same on a gateway with the decision cache off   D = the same read behind a bare HTTP handler"
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
	rps[$1, $3] += $7; p99[$1, $3] += $10; p50[$1, $3] += $8; cnt[$1, $3]++
	if (!($3 in seen)) { seen[$3] = 1; order[++k] = $3 }
}
function avg(a, t, c) { return a[t, c] / cnt[t, c] }
END {
	printf "%-6s %9s %8s %8s %8s %8s %9s %8s %8s %14s %14s\n", "c", "A req/s", "B/A", "B0/A", "C/A", "C0/A", "A p99 µs", "B/A p99", "C/A p99", "C-D p50 µs", "C0-D p50 µs"
	for (i = 1; i <= k; i++) {
		c = order[i]; a = avg(rps, "A", c)
		printf "%-6s %9.1f %8.2f %8.2f %8.2f %8.2f %9d %8.2f %8.2f %14d %14d\n", c, a,
			avg(rps, "B", c) / a, avg(rps, "B0", c) / a, avg(rps, "C", c) / a, avg(rps, "C0", c) / a,
			avg(p99, "A", c), avg(p99, "B", c) / avg(p99, "A", c), avg(p99, "C", c) / avg(p99, "A", c),
			avg(p50, "C", c) - avg(p50, "D", c), avg(p50, "C0", c) - avg(p50, "D", c)
	}
}' "$results"
[ -z "$RATES" ] || echo "Open loop: latency measured from each request's scheduled send time (no coordinated omission)."
# Integration lag (issue 13): how long committed events waited before the
# integrator made them queryable and put them in the tree, per gateway.
for g in "$gw" "$gw0"; do
	curl -fsS "$g/metrics" | awk -v g="$g" '
	/^toolgate_audit_integration_lag_seconds_bucket/ {
		match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
		n[le] = $2; if (le != "+Inf") { les[++k] = le }
	}
	/^toolgate_audit_integration_lag_seconds_count/ { total = $2 }
	/^toolgate_audit_integrated_events_total/ { events = $2 }
	END {
		worst = "none"
		for (i = 1; i <= k; i++) if (n[les[i]] == total) { worst = "<= " les[i] " s"; break }
		if (worst == "none" && total > 0) worst = "> " les[k] " s"
		printf "Integration lag at %s: %d events in %d batches; %.1f%% of batches within 1 s, every batch %s\n",
			g, events, total, total ? 100 * n["1"] / total : 0, worst
	}'
done
echo "Disk under the audit database: $("$tmp/fsynclat" "$tmp")"
echo "  (a call commits its decision event before the effect: C - D can never be below one of these)"

has_phase() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }

# profile: where the gateway's CPU goes under load, and the metrics' share.
# share PROFILE REGEX: percent of the profile's samples under frames matching REGEX.
share() {
	go tool pprof -top -nodecount 1000000 -nodefraction 0 -edgefraction 0 -focus "$2" "$tmp/gateway" "$1" 2>/dev/null |
		sed -n 's/.*accounting for [0-9.]*[mun]*s*, \([0-9.]*%\) of.*/\1/p'
}
if has_phase profile; then
	for t in B C B0; do
		port=$pprof_port
		[ "$t" = B0 ] && port=$pprof0_port
		echo
		log "profile: $t at 16 clients with a 10 s CPU profile"
		load "$t" -c 16 -duration 14s -warmup 1s >"$tmp/profile-$t-load.tsv" &
		lg=$!
		sleep 3
		curl -fsS -o "$tmp/gateway-$t.cpu" "http://127.0.0.1:$port/debug/pprof/profile?seconds=10"
		wait "$lg"
		prof="$tmp/gateway-$t.cpu"
		total=$(go tool pprof -top -nodecount 1 "$tmp/gateway" "$prof" 2>/dev/null |
			sed -n 's/.*Total samples = \([0-9.]*m*s\).*/\1/p')
		rps=$(awk -F'\t' '{ printf "%.0f", $7 }' "$tmp/profile-$t-load.tsv")
		echo "CPU profile of the gateway during $t at 16 clients ($rps req/s; $total of samples in 10 s):"
		printf '  %-44s %s\n' \
			"SQLite (audit inserts, WAL writes, fsync)" "$(share "$prof" 'modernc.org/sqlite')" \
			"OPA evaluation (topdown)" "$(share "$prof" 'opa/v1/topdown')" \
			"JSON (decode, canonical JSON, encode)" "$(share "$prof" 'go-json-experiment')" \
			"ast.InterfaceToValue (policy input)" "$(share "$prof" 'ast.InterfaceToValue')" \
			"garbage collector (background marking)" "$(share "$prof" 'runtime.gcBgMarkWorker')" \
			"allocation (mallocgc)" "$(share "$prof" 'runtime.mallocgc$')" \
			"tool run (read-file)" "$(share "$prof" 'ReadFile..Run')" \
			"Prometheus client (metrics)" "$(share "$prof" 'prometheus/client_golang')"
	done
	echo "  (shares overlap where stacks nest; go tool pprof -focus REGEX on the kept profiles, KEEP=1)"
fi

# reload: a 1,000-rule module lands in the policy folder under load.
if has_phase reload; then
	echo
	log "reload: B at 16 clients while a 1,000-rule module is added"
	{
		printf 'package toolgate.authz\n\n'
		for i in $(seq 1000); do
			printf 'deny contains "bench rule %d" if input.tool.name == "bench-tool-%d"\n\n' "$i" "$i"
		done
	} >"$tmp/rules-1000.rego.tmp"
	rev0=$(curl -fsS -H "Authorization: Bearer $admin" "$gw/v1/policy" | jq -r .revision)
	load B -c 16 -duration 12s -warmup 0s >"$tmp/reload-load.tsv" &
	lg=$!
	sleep 4
	t0=$(date +%s%N)
	mv "$tmp/rules-1000.rego.tmp" "$tmp/policies/bench_rules_1000.rego"
	rev1=$rev0
	while [ "$rev1" = "$rev0" ]; do
		rev1=$(curl -fsS -H "Authorization: Bearer $admin" "$gw/v1/policy" | jq -r .revision)
		[ $(($(date +%s%N) - t0)) -gt 30000000000 ] && { echo "compare.sh: the 1,000-rule pack never served" >&2; break; }
	done
	t1=$(date +%s%N)
	wait "$lg"
	awk -F'\t' -v ms=$(((t1 - t0) / 1000000)) -v r0="$rev0" -v r1="$rev1" '{
		printf "Reload of a 1,000-rule pack under load: new revision serving after %d ms (%s -> %s); %d requests, %d failed, p99 %d µs\n", ms, r0, r1, $5, $6, $10
	}' "$tmp/reload-load.tsv"
	rm -f "$tmp/policies/bench_rules_1000.rego"
fi

# soak: RSS of the gateway under C at 64 clients.
if has_phase soak && [ -n "$SOAK" ]; then
	echo
	log "soak: C at 64 clients for $SOAK"
	load C -c 64 -duration "$SOAK" -warmup 0s >"$tmp/soak-load.tsv" &
	lg=$!
	: >"$tmp/soak-rss"
	while kill -0 "$lg" 2>/dev/null; do
		awk '/^VmRSS:/ { print $2 }' "/proc/$gw_pid/status" >>"$tmp/soak-rss"
		sleep 5
	done
	wait "$lg"
	# The first sample is taken before load starts; growth is measured from
	# the second (5 s in, warm) to the last.
	awk -v line="$(cat "$tmp/soak-load.tsv")" '
	{ s[NR] = $1; if ($1 > max) max = $1 }
	END {
		split(line, f, "\t")
		printf "Soak %s: %d requests, %d errors, %.1f req/s; RSS %.1f MiB at 5 s, %.1f MiB at the end (%+.1f%%), peak %.1f MiB\n",
			"'"$SOAK"'", f[5], f[6], f[7], s[2] / 1024, s[NR] / 1024, (s[NR] - s[2]) * 100 / s[2], max / 1024
	}' "$tmp/soak-rss"
fi
