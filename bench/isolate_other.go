//go:build !linux

package main

// isolateDynamoDB is Linux only: elsewhere the DynamoDB rows run as they
// are.
func isolateDynamoDB() (undo func(), why string) {
	return nil, "CPU masks are set on Linux only"
}
