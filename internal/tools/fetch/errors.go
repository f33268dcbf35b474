package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/toolgate/toolgate/internal/tools"
)

// netError is a failed exchange. Its text names the method and host only:
// the errors of net/http repeat the whole URL, which may carry secrets in
// its path or query, so they are reduced to a reason and never wrapped.
type netError struct {
	method, host, reason string
	cause                error // a sentinel or errno without request detail, or nil
}

func (e *netError) Error() string { return "fetch " + e.method + " " + e.host + ": " + e.reason }

func (e *netError) Unwrap() error { return e.cause }

// newNetError reduces err to a reason.
func newNetError(a artifact, err error) error {
	e := &netError{method: a.method, host: a.target.host}
	e.reason, e.cause = describe(err)
	return e
}

// describe names the failure in a few words, keeping only causes that
// carry no request detail.
func describe(err error) (string, error) {
	var errno syscall.Errno
	var nerr net.Error
	switch {
	case errors.Is(err, tools.ErrTargetChanged):
		return "target changed", tools.ErrTargetChanged
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out", context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return "canceled", context.Canceled
	case errors.As(err, &errno):
		switch errno {
		case syscall.ECONNREFUSED:
			return "connection refused", errno
		case syscall.ECONNRESET:
			return "connection reset", errno
		case syscall.EHOSTUNREACH:
			return "host unreachable", errno
		case syscall.ENETUNREACH:
			return "network unreachable", errno
		case syscall.ETIMEDOUT:
			return "timed out", errno
		}
		return "connection failed", errno
	case errorsAs[*tls.CertificateVerificationError](err), errorsAs[x509.UnknownAuthorityError](err),
		errorsAs[x509.HostnameError](err), errorsAs[x509.CertificateInvalidError](err):
		return "certificate verification failed", nil
	case errorsAs[tls.RecordHeaderError](err), errorsAs[tls.AlertError](err):
		return "TLS handshake failed", nil
	case errors.As(err, &nerr) && nerr.Timeout():
		return "timed out", nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the server", nil
	}
	return "request failed", nil
}

// errorsAs is errors.As with the target built in.
func errorsAs[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}
