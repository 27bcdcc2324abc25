package sqslimits

import "testing"

// TestSeconds checks the second forms against the durations, which the
// API's documented values are given in.
func TestSeconds(t *testing.T) {
	if MaxVisibilitySeconds != 43200 {
		t.Errorf("MaxVisibilitySeconds = %d, want 43200", MaxVisibilitySeconds)
	}
	if MaxWaitTimeSeconds != 20 {
		t.Errorf("MaxWaitTimeSeconds = %d, want 20", MaxWaitTimeSeconds)
	}
}
