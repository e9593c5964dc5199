//go:build !(mutant_nonatomic || mutant_stale || mutant_tryrelease_ignores_held || mutant_skip_wake || mutant_lose_on_cancel || mutant_no_cancel_notify || mutant_double_release || mutant_drop_closed || mutant_eligible_not_set || mutant_limit_lockfree || mutant_recycle_granted || mutant_requeue_front || mutant_no_spin || mutant_handoff_keeps_eligible || mutant_handoff_ignores_free || mutant_no_wait_for_wake)

package mutant

// Active is the fault built into this build: none.
const Active = ""
