//go:build !linux

package sandbox

func ioUringSetup() error { return errUnsupported }
