package decision

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/ratelimit"
)

func decisionWith(t *testing.T, obligations string) (Decision, error) {
	t.Helper()
	return parseDecision(ast.MustParseTerm(`{"allow": true, "obligations": ` + obligations + `}`).Value)
}

func TestRateLimitObligation(t *testing.T) {
	good := map[string][]ratelimit.Limit{
		`{"rate_limit": {"key": "alice", "rate": 2, "burst": 5}}`:     {{Key: "alice", Rate: 2, Burst: 5}},
		`{"rate_limit": {"key": "alice", "rate": 0.5, "burst": 1.0}}`: {{Key: "alice", Rate: 0.5, Burst: 1}},
		// A list, several rules naming one bucket: the strictest of each.
		`{"rate_limit": [{"key": "z", "rate": 10, "burst": 10}, {"key": "a", "rate": 1, "burst": 3}, {"key": "z", "rate": 20, "burst": 2}]}`: {
			{Key: "a", Rate: 1, Burst: 3}, {Key: "z", Rate: 10, Burst: 2},
		},
		// A set, as a partial rule makes it.
		`{"rate_limit": {{"key": "b", "rate": 1, "burst": 1}, {"key": "a", "rate": 1, "burst": 1}}}`: {
			{Key: "a", Rate: 1, Burst: 1}, {Key: "b", Rate: 1, Burst: 1},
		},
	}
	for in, want := range good {
		d, err := decisionWith(t, in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		got := d.Obligations.RateLimits
		if len(got) != len(want) {
			t.Errorf("%s: %+v, want %+v", in, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %+v, want %+v", in, got, want)
			}
		}
		// The audit log keeps the obligation with its numbers as numbers.
		if _, ok := d.Obligations.Raw["rate_limit"]; !ok {
			t.Errorf("%s: Raw lacks rate_limit: %v", in, d.Obligations.Raw)
		}
	}

	// Each of these is a policy that means to limit and says it wrong: the
	// decision is malformed, so the call fails closed (never unlimited).
	bad := map[string]string{
		`{"rate_limit": "alice"}`: "want an object",
		`{"rate_limit": 5}`:       "want an object",
		`{"rate_limit": []}`:      "empty list",
		`{"rate_limit": [{"key": "a", "rate": 1, "burst": 1}, "b"]}`:      "[1]: is string",
		`{"rate_limit": {"key": "", "rate": 1, "burst": 1}}`:              `"key" is empty`,
		`{"rate_limit": {"key": 7, "rate": 1, "burst": 1}}`:               `"key" is number`,
		`{"rate_limit": {"key": "a", "rate": -1, "burst": 1}}`:            `"rate" is -1`,
		`{"rate_limit": {"key": "a", "rate": 0, "burst": 1}}`:             `"rate" is 0`,
		`{"rate_limit": {"key": "a", "rate": "10", "burst": 1}}`:          `"rate" is string`,
		`{"rate_limit": {"key": "a", "rate": 1, "burst": 0}}`:             `"burst" is 0`,
		`{"rate_limit": {"key": "a", "rate": 1, "burst": -5}}`:            `"burst" is -5`,
		`{"rate_limit": {"key": "a", "rate": 1, "burst": null}}`:          `"burst" is null`,
		`{"rate_limit": {"key": "a", "rate": 1}}`:                         `exactly the members`,
		`{"rate_limit": {"key": "a", "rate": 1, "brust": 1}}`:             `unknown member "brust"`,
		`{"rate_limit": {"key": "a", "rate": 1, "burst": 1, "extra": 1}}`: `unknown member "extra"`,
	}
	for in, want := range bad {
		_, err := decisionWith(t, in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", in, err, want)
		}
	}
}
