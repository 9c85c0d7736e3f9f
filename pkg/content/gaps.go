package content

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// GapState is what an app's authors decided about a group of the
// questions its assistant could not answer.
type GapState string

// Decided states; a group without a decision is open.
const (
	// GapResolved: content now answers the group (its wordings were
	// added to an FAQ or an intent, or an FAQ was written for it). It
	// opens again when its questions still go unanswered.
	GapResolved GapState = "resolved"
	// GapDismissed: not worth answering, for a reason. It opens again
	// when it has grown by the app's regrow factor.
	GapDismissed GapState = "dismissed"
)

// Bounds of a decision: the wordings of a group as the inbox lists them
// (50 at most, each as the rollup keeps it, 500 bytes at most).
const (
	MaxGapWordings     = 50
	MaxGapWordingBytes = 500
	MaxGapReasonBytes  = 1000
	MaxGapGroupID      = 64
	// MaxGapDecisions and MaxGapDecisionBytes (their wordings and
	// reasons) bound what an app keeps, which every inbox reads: a
	// decision on a group decided before replaces it.
	MaxGapDecisions     = 10000
	MaxGapDecisionBytes = 4 << 20
)

// ErrTooManyGapDecisions refuses a decision on a new group of an app that
// keeps MaxGapDecisions already.
var ErrTooManyGapDecisions = errors.New("the app keeps " + fmt.Sprint(MaxGapDecisions) + " gap decisions, or " + fmt.Sprint(MaxGapDecisionBytes>>20) +
	" MiB of them, the most it may: reopen some first")

// GapDecision is a decision about one group, named by its ID, with the
// group as its authors saw it: its wordings and how many users had asked.
type GapDecision struct {
	AppID, GroupID string
	State          GapState
	Reason         string
	Wordings       []string
	Users          int64
	DecidedAt      time.Time
	// AuditID is the decision's entry in the audit log.
	AuditID int64
}

// Check says what is wrong with d, as problems with field paths.
func (d GapDecision) Check() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if d.GroupID == "" || len(d.GroupID) > MaxGapGroupID || !utf8.ValidString(d.GroupID) {
		add("groupId", "must be 1 to %d bytes of UTF-8", MaxGapGroupID)
	}
	if d.State != GapResolved && d.State != GapDismissed {
		add("state", "must be %s or %s", GapResolved, GapDismissed)
	}
	if len(d.Reason) > MaxGapReasonBytes || !utf8.ValidString(d.Reason) {
		add("reason", "must be at most %d bytes of UTF-8", MaxGapReasonBytes)
	}
	if d.State == GapDismissed && d.Reason == "" {
		add("reason", "is required to dismiss a group")
	}
	if len(d.Wordings) == 0 || len(d.Wordings) > MaxGapWordings {
		add("wordings", "must hold 1 to %d wordings", MaxGapWordings)
	}
	for i, w := range d.Wordings {
		if w == "" || len(w) > MaxGapWordingBytes || !utf8.ValidString(w) {
			add(fmt.Sprintf("wordings[%d]", i), "must be 1 to %d bytes of UTF-8", MaxGapWordingBytes)
		}
	}
	if d.Users < 0 {
		add("users", "must not be negative")
	}
	return ps
}

// GapSettings are an app's gap inbox settings.
type GapSettings struct {
	// LowConfidence is the match confidence below which a matched turn
	// is a gap: a multiple of GapBand from GapBand to MaxLowConfidence.
	LowConfidence float64
	// RegrowFactor is how many times its users a dismissed group must
	// reach to open again: above 1.
	RegrowFactor float64
}

// Defaults and bounds of GapSettings; the bands are those the analytics
// rollup keeps.
const (
	DefaultGapLowConfidence = 0.5
	DefaultGapRegrowFactor  = 2.0
	GapBand                 = 0.05
	MaxLowConfidence        = 0.9
	MaxRegrowFactor         = 1000
)

// DefaultGapSettings are the settings of an app that set none.
func DefaultGapSettings() GapSettings {
	return GapSettings{LowConfidence: DefaultGapLowConfidence, RegrowFactor: DefaultGapRegrowFactor}
}

// Check says what is wrong with s.
func (s GapSettings) Check() []Problem {
	var ps []Problem
	bands := s.LowConfidence / GapBand
	if math.IsNaN(s.LowConfidence) || s.LowConfidence < GapBand || s.LowConfidence > MaxLowConfidence+1e-9 || math.Abs(bands-math.Round(bands)) > 1e-9 {
		ps = append(ps, Problem{Path: "lowConfidence", Message: fmt.Sprintf("must be a multiple of %v from %v to %v", GapBand, GapBand, MaxLowConfidence)})
	}
	if math.IsNaN(s.RegrowFactor) || s.RegrowFactor <= 1 || s.RegrowFactor > MaxRegrowFactor {
		ps = append(ps, Problem{Path: "regrowFactor", Message: fmt.Sprintf("must be more than 1 and at most %d", MaxRegrowFactor)})
	}
	return ps
}
