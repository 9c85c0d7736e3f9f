package auth

import "github.com/assistantcms/cms/pkg/envflag"

// FailureFlags are the settings of Options.FailureRate and FailureBurst,
// which every service that checks tokens has.
type FailureFlags struct {
	rate  *float64
	burst *int
}

// DefineFailureFlags defines -auth-failure-rate and -auth-failure-burst.
func DefineFailureFlags(fs *envflag.Set) FailureFlags {
	return FailureFlags{
		rate: fs.Float64("auth-failure-rate", "AUTH_FAILURE_RATE", DefaultFailureRate,
			"failed authentications a second one client network may make once its burst is spent; past it, tokens of IDs the store does not have are answered 429 without a lookup, and valid tokens still work (0: no bound)"),
		burst: fs.Int("auth-failure-burst", "AUTH_FAILURE_BURST", DefaultFailureBurst, "failed authentications one client network may make at once"),
	}
}

// Rate is -auth-failure-rate, for Options.FailureRate.
func (f FailureFlags) Rate() float64 { return *f.rate }

// Burst is -auth-failure-burst, for Options.FailureBurst.
func (f FailureFlags) Burst() int { return *f.burst }
