package shell

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// noticeReserve is the room kept under the output cap for the omission
// notice, the timeout notice and the exit-code line.
const noticeReserve = 200

// headTail keeps the first and the last bytes of a command's combined
// output within a budget, counting what it drops. Writes after freeze are
// discarded, so that stragglers cannot change a result being built.
type headTail struct {
	mu       sync.Mutex
	headCap  int
	tailCap  int
	head     []byte
	tail     []byte // ring of the last tailCap bytes written past head
	tailPos  int    // next write position in tail once it is full
	tailFull bool
	total    int64
	frozen   bool
}

func newHeadTail(budget int) *headTail {
	if budget < 2 {
		budget = 2
	}
	h := budget / 2
	return &headTail{headCap: h, tailCap: budget - h}
}

// Write records p. It never fails, so a command never sees EPIPE because
// of the cap.
func (c *headTail) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return len(p), nil
	}
	n := len(p)
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= c.tailCap {
		c.tail = append(c.tail[:0], p[len(p)-c.tailCap:]...)
		c.tailPos, c.tailFull = 0, true
		return n, nil
	}
	if !c.tailFull {
		if room := c.tailCap - len(c.tail); len(p) <= room {
			c.tail = append(c.tail, p...)
			if len(c.tail) == c.tailCap {
				c.tailFull, c.tailPos = true, 0
			}
			return n, nil
		}
		// Fill to capacity, then wrap.
		room := c.tailCap - len(c.tail)
		c.tail = append(c.tail, p[:room]...)
		p = p[room:]
		c.tailFull, c.tailPos = true, 0
	}
	for len(p) > 0 {
		k := copy(c.tail[c.tailPos:], p)
		p = p[k:]
		c.tailPos = (c.tailPos + k) % c.tailCap
	}
	return n, nil
}

// finish freezes the capture and returns the text to show, whether it was
// cut, and the total bytes written.
func (c *headTail) finish() (string, bool, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
	var tail []byte
	if c.tailFull {
		tail = append(append([]byte(nil), c.tail[c.tailPos:]...), c.tail[:c.tailPos]...)
	} else {
		tail = c.tail
	}
	kept := int64(len(c.head) + len(tail))
	if kept == c.total {
		return string(c.head) + string(tail), false, c.total
	}
	// Cut on rune boundaries so the notice never splits a character.
	head := c.head
	for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
		if r, size := utf8.DecodeLastRune(head); r != utf8.RuneError || size > 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted := c.total - int64(len(head)+len(tail))
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 48)
	b.Write(head)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("[... " + strconv.FormatInt(omitted, 10) + " bytes omitted ...]\n")
	b.Write(tail)
	return b.String(), true, c.total
}
