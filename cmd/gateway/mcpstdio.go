package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// mcpStdio is `gateway mcp stdio`: the MCP front door for one local
// client (an IDE that starts its MCP servers as processes), over stdin
// and stdout, as the holder of the credential in --token-file (a JWT
// with the gateway's audience, or an API key). Every call goes through
// policy and audit exactly as over /mcp; stdout carries only the
// protocol, logs go to stderr.
func mcpStdio(args []string, stdin io.ReadCloser, stdout, stderr io.Writer) int {
	fs := newFlags("mcp stdio", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file")
	tokenFile := fs.String("token-file", "", "file holding the bearer credential (required)")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	if *tokenFile == "" {
		fmt.Fprintln(stderr, "gateway mcp stdio: --token-file is required")
		return exitUsage
	}
	raw, err := os.ReadFile(*tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "gateway mcp stdio: --token-file: %v\n", err)
		return exitUsage
	}
	token := strings.TrimSpace(string(raw))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		fmt.Fprintln(stderr, "gateway mcp stdio: --token-file must hold one credential on one line")
		return exitUsage
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g, err := gateway.New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "gateway mcp stdio: %v\n", err)
		var ce *config.Error
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitRuntime
	}
	defer g.Close()
	out, ok := stdout.(io.WriteCloser)
	if !ok {
		out = nopCloser{stdout}
	}
	err = g.ServeStdio(ctx, token, stdin, out)
	var ce *config.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
		return exitOK
	case errors.Is(err, mcpserver.ErrStdioCredential):
		fmt.Fprintf(stderr, "gateway mcp stdio: the credential in %s does not verify (a JWT needs auth.jwt.audience and must carry it)\n", *tokenFile)
		return exitUsage
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "gateway mcp stdio: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "gateway mcp stdio: %v\n", err)
	return exitRuntime
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
