package workspace

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkReadFile measures Prepare+Run of a small file, the common call.
func BenchmarkReadFile(b *testing.B) {
	env, dir := testEnv(b)
	var s strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&s, "line %d of a small source file with some text\n", i)
	}
	writeFiles(b, dir, map[string]string{"src/pkg/file.go": s.String()})
	tool := NewReadFile()
	args := map[string]any{"path": "src/pkg/file.go"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, err := tool.Prepare(ctx, env, args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tool.Run(ctx, env, plan.Artifact, tool.Spec().Limits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrep measures Prepare+Run over a small tree: 5 directories of
// 20 files of 100 lines, a few matches each.
func BenchmarkGrep(b *testing.B) {
	env, dir := testEnv(b)
	files := map[string]string{}
	for d := 0; d < 5; d++ {
		for f := 0; f < 20; f++ {
			var s strings.Builder
			for l := 0; l < 100; l++ {
				if l%25 == 0 {
					fmt.Fprintf(&s, "func Handler%d() error { return nil }\n", l)
				} else {
					fmt.Fprintf(&s, "\tx := compute(%d, %d) // ordinary line\n", f, l)
				}
			}
			files[fmt.Sprintf("pkg%d/file%d.go", d, f)] = s.String()
		}
	}
	writeFiles(b, dir, files)
	tool := NewGrep()
	args := map[string]any{"pattern": `func Handler\d+`, "glob": "*.go"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, err := tool.Prepare(ctx, env, args)
		if err != nil {
			b.Fatal(err)
		}
		res, err := tool.Run(ctx, env, plan.Artifact, tool.Spec().Limits)
		if err != nil {
			b.Fatal(err)
		}
		if res.Data["matches"] != 400 {
			b.Fatalf("matches = %v", res.Data["matches"])
		}
	}
}
