package pgtest

import (
	"context"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Image is the PostgreSQL image started under Docker: the major version CI
// runs on the host.
const Image = "postgres:15-alpine"

// startContainer starts PostgreSQL under Docker and returns its DSN, or ""
// when no Docker engine is reachable. When the engine answers but the
// container does not start (no image and no registry, say), the error
// says so.
func startContainer(ctx context.Context) (string, error) {
	if !dockerReachable(ctx) {
		return "", nil
	}
	c, err := tcpostgres.Run(ctx, Image,
		tcpostgres.WithDatabase("toolgate_test"),
		tcpostgres.WithUsername("toolgate"),
		tcpostgres.WithPassword("toolgate"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err == nil {
		var dsn string
		if dsn, err = c.ConnectionString(ctx, "sslmode=disable"); err == nil {
			// No Terminate: the container serves every test of this process
			// and Ryuk removes it once the process is gone.
			return dsn, nil
		}
	}
	if c != nil {
		testcontainers.TerminateContainer(c)
	}
	return "", fmt.Errorf("a Docker engine is reachable but the %s container did not start (%w)", Image, err)
}

// dockerReachable reports whether testcontainers finds a Docker engine that
// answers. Its host discovery panics when it finds no engine at all.
func dockerReachable(ctx context.Context) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(ctx) == nil
}
