package decision

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestOptions tune RunTests.
type TestOptions struct {
	// Verbose prints every test, not only failures (opa test -v).
	Verbose bool
	// Coverage prints the coverage of every file and in total.
	Coverage bool
	// Threshold fails the run when total coverage (in percent) is below it;
	// it implies Coverage. Zero disables it.
	Threshold float64
	// Timeout bounds each test; default 5s as in opa test.
	Timeout time.Duration
}

// RunTests runs the Rego unit tests (test_* rules) found in dirs, the way
// `opa test DIR...` does: modules and data of all dirs load together, and
// results print in OPA's format ("data.pkg.test_x: FAIL (1.2ms)", then
// "PASS: n/m"). Folders load with the engine's rules (hidden files skipped,
// data from data.json / data.yaml) and compile in strict mode, so a test
// suite passes only against a policy the engine would load. passed is false
// when any test fails or errors, or coverage is below opts.Threshold; err
// is for folders that do not load or compile.
func RunTests(ctx context.Context, dirs []string, w io.Writer, opts TestOptions) (passed bool, err error) {
	modules, store, err := tester.LoadWithParserOptions(dirs, fileFilter(true), ast.ParserOptions{
		RegoVersion:       ast.RegoV1,
		ProcessAnnotation: true,
	})
	if err != nil {
		return false, err
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return false, err
	}
	defer store.Abort(ctx, txn)

	coverage := opts.Coverage || opts.Threshold > 0
	compiler := ast.NewCompiler().
		WithStrict(true).
		WithDefaultRegoVersion(ast.RegoV1).
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn)).
		WithEnablePrintStatements(true)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		StackTraces(true).
		SetTimeout(cmp.Or(opts.Timeout, 5*time.Second))
	var cov *cover.Cover
	if coverage {
		cov = cover.New()
		// Only the percentages are reported; skip the passes that explain
		// uncovered lines.
		runner = runner.SetCoverageQueryTracer(cov).SetCoverageRuns([]cover.Kind{})
	} else {
		// Traces explain failures in verbose mode; tracing and coverage
		// exclude each other in the OPA runner.
		runner = runner.EnableTracing(opts.Verbose)
	}

	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		return false, err
	}
	// Tests run in parallel; print them in source order so runs compare.
	var results []*tester.Result
	passed = true
	for r := range ch {
		if !r.Pass() && !r.Skip {
			passed = false
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b *tester.Result) int {
		if a.Location == nil || b.Location == nil {
			return strings.Compare(a.Package+a.Name, b.Package+b.Name)
		}
		return cmp.Or(strings.Compare(a.Location.File, b.Location.File), cmp.Compare(a.Location.Row, b.Location.Row))
	})
	sorted := make(chan *tester.Result, len(results))
	for _, r := range results {
		sorted <- r
	}
	close(sorted)
	if err := (tester.PrettyReporter{Output: w, Verbose: opts.Verbose}).Report(sorted); err != nil {
		return false, err
	}
	if len(results) == 0 {
		fmt.Fprintln(w, "no tests found")
		passed = false
	}

	if cov != nil {
		total := printCoverage(w, cov.Report(modules))
		if total < opts.Threshold {
			fmt.Fprintf(w, "FAIL: coverage %.2f%% is below the threshold %.2f%%\n", total, opts.Threshold)
			passed = false
		}
	}
	return passed, nil
}

// printCoverage prints each file's coverage and returns the total percent.
func printCoverage(w io.Writer, report cover.Report) float64 {
	files := make([]string, 0, len(report.Files))
	width := len("total")
	for f := range report.Files {
		files = append(files, f)
		width = max(width, len(f))
	}
	slices.Sort(files)
	fmt.Fprintln(w, "Coverage:")
	for _, f := range files {
		fr := report.Files[f]
		fmt.Fprintf(w, "  %-*s %7.2f%%", width, f, fr.Coverage)
		if fr.NotCoveredLines > 0 {
			fmt.Fprintf(w, "  not covered: %s", notCoveredRows(fr))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %-*s %7.2f%%\n", width, "total", report.Coverage)
	return report.Coverage
}

// notCoveredRows lists uncovered lines as ranges ("3, 12-14") so the author
// knows which rules still need a test.
func notCoveredRows(fr *cover.FileReport) string {
	var rows []int
	for _, r := range fr.NotCovered {
		for row := r.Start.Row; row <= r.End.Row; row++ {
			rows = append(rows, row)
		}
	}
	slices.Sort(rows)
	rows = slices.Compact(rows)
	var parts []string
	for i := 0; i < len(rows); {
		j := i
		for j+1 < len(rows) && rows[j+1] == rows[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(rows[i]))
		} else {
			parts = append(parts, strconv.Itoa(rows[i])+"-"+strconv.Itoa(rows[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
