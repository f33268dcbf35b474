package decision

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

const (
	allowTests = `package toolgate.authz_test

import data.toolgate.authz

test_read_file_allowed if authz.decision.allow with input as {"tool": {"name": "read-file"}}

test_write_file_denied if not authz.decision.allow with input as {"tool": {"name": "write-file"}}
`
	failingTest = `package toolgate.broken_test

import data.toolgate.authz

test_write_file_allowed if authz.decision.allow with input as {"tool": {"name": "write-file"}}
`
)

func TestRunTestsReportsLikeOPA(t *testing.T) {
	pack := newPack(t, nil)
	tests := t.TempDir()
	writePack(t, tests, map[string]string{"authz_test.rego": allowTests})
	var out bytes.Buffer
	passed, err := RunTests(context.Background(), []string{pack, tests}, &out, TestOptions{Verbose: true})
	if err != nil || !passed {
		t.Fatalf("RunTests = %v, %v\n%s", passed, err, out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^data\.toolgate\.authz_test\.test_read_file_allowed: PASS \(.+\)$`),
		regexp.MustCompile(`(?m)^data\.toolgate\.authz_test\.test_write_file_denied: PASS \(.+\)$`),
		regexp.MustCompile(`(?m)^PASS: 2/2$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
}

func TestRunTestsFailsOnAFailingTest(t *testing.T) {
	dir := newPack(t, map[string]string{"authz_test.rego": allowTests, "broken_test.rego": failingTest})
	var out bytes.Buffer
	passed, err := RunTests(context.Background(), []string{dir}, &out, TestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if passed {
		t.Fatalf("a failing Rego test passed:\n%s", out.String())
	}
	for _, want := range []string{"data.toolgate.broken_test.test_write_file_allowed: FAIL", "PASS: 2/3", "FAIL: 1/3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "test_read_file_allowed") {
		t.Errorf("non-verbose output lists passing tests:\n%s", out.String())
	}
}

func TestRunTestsErrorsOnCompileFailure(t *testing.T) {
	dir := newPack(t, map[string]string{"x_test.rego": "package x_test\n\ntest_x if {\n\ty := 1\n}\n"})
	var out bytes.Buffer
	passed, err := RunTests(context.Background(), []string{dir}, &out, TestOptions{})
	if err == nil || passed {
		t.Fatalf("RunTests = %v, %v; want a strict compile error", passed, err)
	}
	if !strings.Contains(err.Error(), "x_test.rego:4") {
		t.Errorf("error %q does not name x_test.rego:4", err)
	}
}

func TestRunTestsWithoutTestsFails(t *testing.T) {
	var out bytes.Buffer
	passed, err := RunTests(context.Background(), []string{newPack(t, nil)}, &out, TestOptions{})
	if err != nil || passed {
		t.Errorf("RunTests with no tests = %v, %v; want not passed", passed, err)
	}
}

func TestRunTestsCoverage(t *testing.T) {
	// Only read-file is tested: availability is never evaluated.
	dir := newPack(t, map[string]string{"authz_test.rego": allowTests})
	var out bytes.Buffer
	passed, err := RunTests(context.Background(), []string{dir}, &out, TestOptions{Coverage: true})
	if err != nil || !passed {
		t.Fatalf("RunTests = %v, %v\n%s", passed, err, out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Coverage:$`),
		regexp.MustCompile(`(?m)^  \S+/authz\.rego +100\.00%$`),
		regexp.MustCompile(`(?m)^  \S+/availability\.rego +0\.00%  not covered: 3, 5$`),
		regexp.MustCompile(`(?m)^  total +\d+\.\d\d%$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}

	out.Reset()
	passed, err = RunTests(context.Background(), []string{dir}, &out, TestOptions{Threshold: 100})
	if err != nil || passed {
		t.Errorf("RunTests under a 100%% threshold = %v, %v; want not passed\n%s", passed, err, out.String())
	}
	if !strings.Contains(out.String(), "is below the threshold") {
		t.Errorf("output does not explain the threshold failure:\n%s", out.String())
	}
}
