package tools

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The tool-name rule (CONTRACT.md §6), the one every tool name, MCP
// namespace and skill name is checked with.
func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"read-file", true},
		{"bash", true},
		{"a", true},
		{"0", true},
		{"notes-search-2", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("ab-", 21) + "a", true}, // 64 bytes
		{"", false},
		{strings.Repeat("a", 65), false},
		{strings.Repeat("ab-", 21) + "ab", false}, // 65 bytes
		{"a--b", false},
		{"a---b", false},
		{"-a", false},
		{"a-", false},
		{"-", false},
		{"Read_File", false},
		{"Read-file", false},
		{"read_file", false},
		{"read file", false},
		{"read.file", false},
		{"réad", false},
		{"read-file\n", false},
	}
	pattern := regexp.MustCompile(NamePattern)
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
		// The published pattern (with maxLength) says the same.
		if got := pattern.MatchString(tt.name) && len(tt.name) <= MaxNameBytes; got != tt.ok {
			t.Errorf("NamePattern on %q = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func TestValidNameOfCapsTheLength(t *testing.T) {
	tests := []struct {
		name string
		max  int
		ok   bool
	}{
		{strings.Repeat("a", 32), 32, true},
		{strings.Repeat("a", 33), 32, false},
		{"a--b", 32, false},
		{"notes", 32, true},
		// A cap above MaxNameBytes never lets a longer name through.
		{strings.Repeat("a", 65), 100, false},
		{"a", 0, false},
	}
	for _, tt := range tests {
		if got := ValidNameOf(tt.name, tt.max); got != tt.ok {
			t.Errorf("ValidNameOf(%q, %d) = %v, want %v", tt.name, tt.max, got, tt.ok)
		}
	}
}

// The public API description publishes the same rule for Tool.name.
func TestOpenAPIPublishesTheNameRule(t *testing.T) {
	spec, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "name: {type: string, maxLength: " + strconv.Itoa(MaxNameBytes) + ", pattern: '" + NamePattern + "'}"
	if !strings.Contains(string(spec), want) {
		t.Errorf("api/openapi.yaml does not describe Tool.name as %s", want)
	}
}
