package jwks

import (
	"encoding/base64"
	"errors"
	"testing"
)

func seg(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func compact(header, payload string) string {
	return seg(header) + "." + seg(payload) + ".c2ln"
}

func TestCheckCompact(t *testing.T) {
	const hdr = `{"alg":"ES256","typ":"JWT","kid":"k1"}`
	const claims = `{"sub":"alice","tenant":"acme","exp":1}`
	tests := []struct {
		name  string
		token string
		want  error // nil: passes
	}{
		{"an ordinary token", compact(hdr, claims), nil},
		{"nested objects with the same member names at different depths", compact(hdr, `{"a":{"sub":1},"sub":"x"}`), nil},
		{"crit naming an extension", compact(`{"alg":"ES256","kid":"k1","crit":["b64"],"b64":false}`, claims), ErrCritical},
		{"crit naming a registered parameter", compact(`{"alg":"ES256","crit":["exp"],"exp":1}`, claims), ErrCritical},
		{"empty crit", compact(`{"alg":"ES256","crit":[]}`, claims), ErrCritical},
		{"crit that is not a list", compact(`{"alg":"ES256","crit":"b64"}`, claims), ErrCritical},
		{"crit null", compact(`{"alg":"ES256","crit":null}`, claims), ErrCritical},
		{"duplicate member in the payload", compact(hdr, `{"sub":"alice","tenant":"globex","tenant":"acme","exp":1}`), ErrMalformed},
		{"duplicate member nested in the payload", compact(hdr, `{"sub":"alice","roles":{"a":1,"a":2}}`), ErrMalformed},
		{"duplicate member in the header", compact(`{"alg":"ES256","kid":"k1","kid":"k2"}`, claims), ErrMalformed},
		{"escaped duplicate in the header", compact(`{"alg":"ES256","al\u0067":"none"}`, claims), ErrMalformed},
		{"invalid UTF-8 in the payload", compact(hdr, "{\"sub\":\"al\xffice\"}"), ErrMalformed},
		{"payload that is an array", compact(hdr, `["sub"]`), ErrMalformed},
		{"payload that is a string", compact(hdr, `"sub"`), ErrMalformed},
		{"data after the payload object", compact(hdr, claims+` {}`), ErrMalformed},
		{"payload that is not JSON", compact(hdr, `{sub:alice}`), ErrMalformed},
		{"header that is not base64url", "e30=." + seg(claims) + ".c2ln", ErrMalformed},
		{"two segments", seg(hdr) + "." + seg(claims), ErrMalformed},
		{"four segments", compact(hdr, claims) + ".x", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCompact(tt.token)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
