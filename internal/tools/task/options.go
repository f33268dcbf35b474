package task

import (
	"crypto/rand"
	"strings"
	"time"
)

// Default limits.
const (
	DefaultMaxTasks        = 100  // per (tenant, session)
	DefaultMaxSubject      = 200  // characters
	DefaultMaxDescription  = 4000 // characters
	DefaultMaxDependencies = 20   // blocked_by ids per task
)

// idPrefix and idChars describe a task id: "task_" and 12 characters of the
// lower-case base32 alphabet (60 random bits).
const (
	idPrefix = "task_"
	idChars  = 12
	idLen    = len(idPrefix) + idChars
	// idPattern is the same rule for the JSON Schemas.
	idPattern = `^task_[a-z2-7]{12}$`
)

// Options configure the task tools. Zero values take the defaults.
type Options struct {
	MaxTasks        int // tasks per session
	MaxSubject      int // characters of a subject
	MaxDescription  int // characters of a description
	MaxDependencies int // ids in a task's blocked_by

	// Now is the clock for creation and update times (default time.Now).
	Now func() time.Time
	// NewID returns a fresh task id (default: "task_" + 12 random base32
	// characters from crypto/rand). Its ids must have that form.
	NewID func() string
}

func (o Options) withDefaults() Options {
	if o.MaxTasks <= 0 {
		o.MaxTasks = DefaultMaxTasks
	}
	if o.MaxSubject <= 0 {
		o.MaxSubject = DefaultMaxSubject
	}
	if o.MaxDescription <= 0 {
		o.MaxDescription = DefaultMaxDescription
	}
	if o.MaxDependencies <= 0 {
		o.MaxDependencies = DefaultMaxDependencies
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = NewID
	}
	return o
}

// NewID returns "task_" followed by 12 random lower-case base32 characters.
func NewID() string {
	return idPrefix + strings.ToLower(rand.Text()[:idChars])
}

// ValidID reports whether s has the form of a task id.
func ValidID(s string) bool {
	if len(s) != idLen || !strings.HasPrefix(s, idPrefix) {
		return false
	}
	for i := len(idPrefix); i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
