package workspace

import (
	"sort"
	"strconv"
	"strings"
)

// Diff preview limits.
const (
	diffContext   = 3
	diffMaxLines  = 40
	diffLineRunes = 200
)

// replaceGroup is a run of old lines touched by one or more occurrences
// that share lines.
type replaceGroup struct {
	oa, ob   int // first and last old line (0-based, inclusive)
	first, n int // index of the first occurrence and how many
	old, new []string
}

// diffPreview renders a unified diff of before → after where after is
// before with the occurrences at byte offsets at (each oldLen bytes long)
// replaced by newLen bytes. It works from the occurrences, not by diffing
// the texts, so it costs O(size) whatever the edit. At most diffMaxLines
// lines follow the file headers.
func diffPreview(name, before, after string, at []int, oldLen, newLen int) string {
	if len(at) == 0 {
		return ""
	}
	starts := lineStarts(before)
	lineOf := func(pos int) int { return sort.SearchInts(starts, pos+1) - 1 }
	lineEnd := func(l int) int {
		if l+1 < len(starts) {
			return starts[l+1]
		}
		return len(before)
	}
	delta := newLen - oldLen

	var groups []replaceGroup
	for i, p := range at {
		oa, ob := lineOf(p), lineOf(p+oldLen-1)
		if k := len(groups) - 1; k >= 0 && oa <= groups[k].ob {
			groups[k].ob = max(groups[k].ob, ob)
			groups[k].n++
			continue
		}
		groups = append(groups, replaceGroup{oa: oa, ob: ob, first: i, n: 1})
	}
	for i := range groups {
		g := &groups[i]
		from, to := starts[g.oa], lineEnd(g.ob)
		shift := g.first * delta
		g.old = splitLines(before[from:to])
		g.new = splitLines(after[from+shift : to+shift+g.n*delta])
	}

	oldLines := splitLines(before)
	var b strings.Builder
	b.WriteString("--- a/" + name + "\n+++ b/" + name + "\n")
	emitted := 0
	emit := func(prefix byte, s string) bool {
		if emitted == diffMaxLines {
			return false
		}
		emitted++
		b.WriteByte(prefix)
		text, cut := cutRunes([]byte(s), diffLineRunes)
		b.Write(text)
		if cut {
			b.WriteString(lineCutMarker)
		}
		b.WriteByte('\n')
		return true
	}

	lineShift := 0 // new-minus-old line count of the groups already shown
	for i := 0; i < len(groups); {
		// A hunk takes groups whose context overlaps.
		j := i + 1
		for j < len(groups) && groups[j].oa-diffContext <= groups[j-1].ob+diffContext+1 {
			j++
		}
		hs := max(0, groups[i].oa-diffContext)
		he := min(len(oldLines)-1, groups[j-1].ob+diffContext)
		oldCount, newCount := he-hs+1, he-hs+1
		for _, g := range groups[i:j] {
			newCount += len(g.new) - len(g.old)
		}
		b.WriteString("@@ -" + hunkRange(hs, oldCount) + " +" + hunkRange(hs+lineShift, newCount) + " @@\n")
		line := hs
		for _, g := range groups[i:j] {
			for ; line < g.oa; line++ {
				if !emit(' ', oldLines[line]) {
					return b.String() + previewCut
				}
			}
			for _, s := range g.old {
				if !emit('-', s) {
					return b.String() + previewCut
				}
			}
			for _, s := range g.new {
				if !emit('+', s) {
					return b.String() + previewCut
				}
			}
			line = g.ob + 1
			lineShift += len(g.new) - len(g.old)
		}
		for ; line <= he; line++ {
			if !emit(' ', oldLines[line]) {
				return b.String() + previewCut
			}
		}
		i = j
	}
	return b.String()
}

const previewCut = "[diff preview cut at 40 lines]\n"

// hunkRange formats a unified-diff range from a 0-based start.
func hunkRange(start, count int) string {
	if count == 0 {
		// An empty range names the line before it.
		return strconv.Itoa(start) + ",0"
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(count)
}

// lineStarts returns the byte offset of each line of s.
func lineStarts(s string) []int {
	starts := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && i+1 < len(s) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// splitLines splits s into lines without their newlines; a final newline
// does not start another line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}
