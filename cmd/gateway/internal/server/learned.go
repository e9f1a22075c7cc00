package server

// ForgetStaleLimits forgets the limits learned from a provider's answers that no answer has
// reported again for a few minutes, and when it forgets any, hands the rest on to be compiled
// (see Options.LimitsLearned): the configured limits are back. The gateway calls it every few
// seconds.
func (s *Server) ForgetStaleLimits() {
	if s.gate.ForgetStale() && s.opts.LimitsLearned != nil {
		s.opts.LimitsLearned()
	}
}
