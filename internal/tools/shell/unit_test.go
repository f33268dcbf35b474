package shell

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/tools"
)

func TestToolsArePublishedInOrderWithValidSchemas(t *testing.T) {
	sh := newTestShell(t, Options{})
	want := []struct{ name, action string }{
		{"bash", "command.execute"}, {"process-output", "process.read"},
		{"process-input", "process.write"}, {"process-stop", "process.stop"},
	}
	ts := sh.Tools()
	if len(ts) != len(want) {
		t.Fatalf("%d tools", len(ts))
	}
	if _, err := tools.NewRegistry(ts...); err != nil {
		t.Fatal(err)
	}
	for i, tool := range ts {
		s := tool.Spec()
		if s.Name != want[i].name || s.Action != want[i].action || s.Kind != tools.KindBuiltin || s.Description == "" {
			t.Errorf("tool %d: %+v", i, s)
		}
		if s.Limits.Timeout <= 0 || s.Limits.MaxOutputBytes <= 0 {
			t.Errorf("%s: limits unset", s.Name)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s.InputSchema))
		if err != nil {
			t.Fatalf("%s: schema is not JSON: %v", s.Name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://"+s.Name, doc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile("mem://" + s.Name); err != nil {
			t.Errorf("%s: schema does not compile: %v", s.Name, err)
		}
		var shape struct {
			AdditionalProperties *bool                     `json:"additionalProperties"`
			Properties           map[string]map[string]any `json:"properties"`
		}
		json.Unmarshal([]byte(s.InputSchema), &shape)
		if shape.AdditionalProperties == nil || *shape.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false", s.Name)
		}
		for name, p := range shape.Properties {
			if p["description"] == nil {
				t.Errorf("%s.%s: no description", s.Name, name)
			}
		}
	}
	// The bash call ceiling leaves room past the longest command.
	if ts[0].Spec().Limits.Timeout <= sh.lim.MaxTimeout {
		t.Errorf("bash call timeout %v must exceed the command ceiling %v", ts[0].Spec().Limits.Timeout, sh.lim.MaxTimeout)
	}
}

func TestHeadTailKeepsBothEndsOnRuneBoundaries(t *testing.T) {
	c := newHeadTail(20)
	c.Write([]byte("héllo wörld "))
	for range 100 {
		c.Write([]byte("ü"))
	}
	c.Write([]byte(" the end"))
	text, cut, total := c.finish()
	if !cut || total != int64(len("héllo wörld ")+200+len(" the end")) {
		t.Fatalf("cut=%v total=%d", cut, total)
	}
	if !strings.HasPrefix(text, "héllo wö\n[... ") || !strings.HasSuffix(text, " the end") || !strings.Contains(text, "bytes omitted") {
		t.Errorf("text = %q", text)
	}
	if !bytes.Equal([]byte(text), []byte(strings.ToValidUTF8(text, "?"))) {
		t.Errorf("split a character: %q", text)
	}
	c.Write([]byte("late"))
	if again, _, _ := c.finish(); again != text {
		t.Errorf("a write after finish changed the result")
	}
}

func TestHeadTailUncutWhenWithinBudget(t *testing.T) {
	c := newHeadTail(10)
	c.Write([]byte("abcd"))
	c.Write([]byte("efghij"))
	if text, cut, total := c.finish(); text != "abcdefghij" || cut || total != 10 {
		t.Errorf("%q %v %d", text, cut, total)
	}
}

func TestOutputRingCursors(t *testing.T) {
	r := newOutputRing(8)
	r.Write([]byte("0123"))
	r.Write([]byte("456789ab")) // total 12, window "456789ab"
	c, _, _ := r.read(0, 100)
	if string(c.data) != "456789ab" || c.dropped != 4 || c.next != 12 {
		t.Errorf("%q dropped %d next %d", c.data, c.dropped, c.next)
	}
	c, _, _ = r.read(6, 3)
	if string(c.data) != "678" || c.dropped != 0 || c.next != 9 {
		t.Errorf("%q dropped %d next %d", c.data, c.dropped, c.next)
	}
	c, _, _ = r.read(99, 3)
	if len(c.data) != 0 || c.next != 12 {
		t.Errorf("past the end: %q next %d", c.data, c.next)
	}
	r.Write([]byte("0123456789ABCDEF")) // larger than the ring
	c, _, _ = r.read(12, 100)
	if string(c.data) != "89ABCDEF" || c.dropped != 8 || c.next != 28 {
		t.Errorf("%q dropped %d next %d", c.data, c.dropped, c.next)
	}
}

func TestOutputRingNeverSplitsACharacter(t *testing.T) {
	r := newOutputRing(64)
	r.Write([]byte("aé")) // 'a', then 2 bytes
	c, _, _ := r.read(0, 2)
	if string(c.data) != "a" || c.next != 1 {
		t.Errorf("%q next %d", c.data, c.next)
	}
	c, _, _ = r.read(1, 2)
	if string(c.data) != "é" || c.next != 3 {
		t.Errorf("%q next %d", c.data, c.next)
	}
	r2 := newOutputRing(3)
	r2.Write([]byte("aéé")) // window is the last 3 bytes: 0xA9 'é'
	c, _, _ = r2.read(0, 10)
	if string(c.data) != "é" || c.dropped != 3 {
		t.Errorf("%q dropped %d", c.data, c.dropped)
	}
}

func TestOutputRingWakesWaiters(t *testing.T) {
	r := newOutputRing(8)
	_, changed, _ := r.read(0, 1)
	r.Write([]byte("x"))
	select {
	case <-changed:
	default:
		t.Error("write did not wake the waiter")
	}
	_, changed, _ = r.read(1, 1)
	r.close()
	select {
	case <-changed:
	default:
		t.Error("close did not wake the waiter")
	}
}

func TestEnvAllowlistEntries(t *testing.T) {
	tmpl, err := newEnvTemplate([]string{"PATH=/opt/bin", "HOME", "LANG", "TERM=dumb", "MISSING"}, func(n string) string {
		if n == "LANG" {
			return "C"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(tmpl.build("/ws"), " ")
	if got != "PATH=/opt/bin LANG=C TERM=dumb HOME=/ws GIT_CEILING_DIRECTORIES=/ GIT_CONFIG_NOSYSTEM=1" || tmpl.path != "/opt/bin" {
		t.Errorf("env = %q path %q", got, tmpl.path)
	}
	if _, err := newEnvTemplate([]string{"=x"}, nil); err == nil {
		t.Error("an empty name was accepted")
	}
}
