//go:build !unix

package main

// descriptorLimit is not known here.
func descriptorLimit() (uint64, bool) { return 0, false }
