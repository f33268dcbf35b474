package decision

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestConcealMember(t *testing.T) {
	for in, want := range map[string]bool{
		`{"allow": false, "conceal": true}`:  true,
		`{"allow": false, "conceal": false}`: false,
		`{"allow": false}`:                   false,
		// Read as given; only a denial is ever concealed (the pipeline).
		`{"allow": true, "conceal": true}`: true,
	} {
		d, err := parseDecision(ast.MustParseTerm(in).Value)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if d.Conceal != want {
			t.Errorf("%s: Conceal = %v, want %v", in, d.Conceal, want)
		}
		if _, ok := d.Raw["conceal"]; ok != strings.Contains(in, "conceal") {
			t.Errorf("%s: the raw decision does not keep conceal as given: %v", in, d.Raw)
		}
	}
	// A policy that means to conceal and says it wrong is broken: it
	// fails closed rather than answering with the denial it meant to hide.
	for _, in := range []string{`{"allow": false, "conceal": "yes"}`, `{"allow": false, "conceal": 1}`} {
		_, err := parseDecision(ast.MustParseTerm(in).Value)
		if err == nil || !strings.Contains(err.Error(), `decision "conceal" is`) {
			t.Errorf("%s: error %v, want a malformed conceal", in, err)
		}
	}
}
