package workspace

import (
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/tools"
)

// noticeReserve is the room kept under the output cap for a closing notice.
const noticeReserve = 160

// lineCutMarker follows a line that was cut to its length cap.
const lineCutMarker = " [line truncated]"

// outputCap is the byte budget of a call: the limit policy tightened, or
// the tool's own when none was passed.
func outputCap(lim tools.Limits, own int) int {
	if lim.MaxOutputBytes > 0 {
		return lim.MaxOutputBytes
	}
	return own
}

// bodyBudget is what may be spent on content before the closing notice.
func bodyBudget(max int) int {
	if max > 2*noticeReserve {
		return max - noticeReserve
	}
	return max / 2
}

// cutRunes returns at most n runes of b (n > 0) and whether it cut.
func cutRunes(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false // fewer bytes than runes allowed: nothing to count
	}
	i, count := 0, 0
	for i < len(b) && count < n {
		_, size := utf8.DecodeRune(b[i:])
		i += size
		count++
	}
	return b[:i], i < len(b)
}

// capString cuts s to at most max bytes without splitting a UTF-8 sequence.
func capString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
