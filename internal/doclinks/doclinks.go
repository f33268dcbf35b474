// Package doclinks checks that the documentation's cross-references
// resolve, so that moving or renaming a heading cannot leave a dangling
// pointer behind. Its test walks the repository: every relative link and
// #anchor of the Markdown pages must name a file that exists and a heading
// it has, and every `README "Section"` or `docs/x.md "Section"` reference
// in source, configuration and comments must name a real heading of that
// file.
//
// Headings become anchors as GitHub renders them: lower-cased, every
// character but letters, digits, spaces, hyphens and underscores dropped,
// spaces turned into hyphens, and -1, -2, … added to repeats.
package doclinks

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Heading is one Markdown heading of a page.
type Heading struct {
	Line   int
	Text   string // as written, inline code and links kept
	Anchor string // its GitHub anchor, unique in the page
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// Headings returns the ATX headings of a Markdown page, outside fenced
// code blocks, with their anchors.
func Headings(md string) []Heading {
	var hs []Heading
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence) && strings.TrimSpace(line) == f:
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Slug(m[2])
		if k := seen[a]; k > 0 {
			seen[a] = k + 1
			a = fmt.Sprintf("%s-%d", a, k)
		} else {
			seen[a] = 1
		}
		hs = append(hs, Heading{Line: n, Text: m[2], Anchor: a})
	}
	return hs
}

// fenceOf returns the fence a line opens or closes (``` or ~~~, at least
// three), or "".
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(t, c+c+c) {
			return t[:len(t)-len(strings.TrimLeft(t, c))]
		}
	}
	return ""
}

// Slug is the anchor GitHub gives a heading's text (before de-duplication).
func Slug(text string) string {
	text = PlainText(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// PlainText is a heading's text as rendered: links become their text,
// inline-code backticks and emphasis markers go.
func PlainText(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	text = strings.NewReplacer("`", "", "**", "", "__", "").Replace(text)
	return strings.TrimSpace(text)
}

// Link is a Markdown link or image of a page.
type Link struct {
	Line   int
	Target string
}

// Links returns the inline links and images of a Markdown page, outside
// fenced code blocks and inline code.
func Links(md string) []Link {
	var ls []Link
	fence := ""
	for n, line := range strings.Split(md, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence) && strings.TrimSpace(line) == f:
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, target := range linkTargets(stripCode(line)) {
			ls = append(ls, Link{Line: n + 1, Target: target})
		}
	}
	return ls
}

// stripCode blanks inline code spans, so that `[a](b)` in code is no link.
func stripCode(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		ticks := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		run := line[i : i+ticks]
		end := strings.Index(line[i+ticks:], run)
		if end < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		b.WriteString(strings.Repeat(" ", ticks*2+end))
		line = line[i+ticks+end+ticks:]
	}
}

// linkTargets finds "](target)" after a bracketed text, nested brackets
// (an image inside a link) included.
func linkTargets(line string) []string {
	var out []string
	for i := 0; i < len(line); i++ {
		if line[i] != ']' || i+1 >= len(line) || line[i+1] != '(' {
			continue
		}
		depth, j := 0, i+2
		for ; j < len(line); j++ {
			if line[j] == '(' {
				depth++
			} else if line[j] == ')' {
				if depth == 0 {
					break
				}
				depth--
			}
		}
		if j >= len(line) {
			break
		}
		target := strings.TrimSpace(line[i+2 : j])
		if k := strings.IndexAny(target, " \t"); k >= 0 { // [a](b "title")
			target = target[:k]
		}
		target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
		out = append(out, target)
	}
	return out
}

// Ref is a reference to a section by file and heading, as comments and
// configuration write it: the file, a space (a comma or colon may come
// first, a comment's line break may stand for the space), then the
// heading's text in double quotes, starting with a capital letter or a
// backtick, as headings here do; it may run on over comment lines.
type Ref struct {
	Line    int
	File    string // as written: README, README.md, docs/x.md, …
	Section string // the heading's text, comment markers and line breaks removed
}

var sectionRef = regexp.MustCompile(`\b(README(?:\.md)?|(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.md)[,:]?(?:[ \t]+|[ \t]*\n[ \t]*(?://|#|\*)?[ \t]*)\\?"([A-Z\x60][^"\\{}\[\];$=<>|]{0,120}?)\\?"`)

// commentBreak is a line break inside a reference, with the next line's
// comment marker and indentation.
var commentBreak = regexp.MustCompile(`[ \t]*\n[ \t]*(?://|#|\*)?[ \t]*`)

// Refs returns the section references of a text file.
func Refs(text string) []Ref {
	var rs []Ref
	for _, m := range sectionRef.FindAllStringSubmatchIndex(text, -1) {
		// A quoted file name ("README.md", "docs/a.md") is a string, not a
		// reference: the file name must not itself end a quotation.
		if m[2] > 0 && (text[m[2]-1] == '"' || text[m[2]-1] == '\'') {
			continue
		}
		section := commentBreak.ReplaceAllString(text[m[4]:m[5]], " ")
		rs = append(rs, Ref{
			Line:    1 + strings.Count(text[:m[0]], "\n"),
			File:    text[m[2]:m[3]],
			Section: strings.TrimSpace(section),
		})
	}
	return rs
}
