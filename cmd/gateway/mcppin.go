package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
)

// mcpPin is `gateway mcp pin`: it pins the definitions every MCP upstream
// publishes now in mcp.lock.json beside the config. Review the file's diff
// before committing it: it is what the gateway will offer.
func mcpPin(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcp pin", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	if len(cfg.Tools.MCP) == 0 {
		fmt.Fprintf(stderr, "gateway mcp pin: %s declares no MCP upstream (tools.mcp)\n", cfg.File)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, skipped, err := gateway.PinMCP(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "gateway mcp pin: %v\n", err)
		var ce *config.Error
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitRuntime
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "not pinned: %s\n", s)
	}
	names := make([]string, 0, len(rep.Tools))
	for n := range rep.Tools {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(stdout, "pinned %d tool(s) of %s\n", rep.Tools[n], n)
	}
	fmt.Fprintf(stdout, "wrote %s\n", rep.File)
	return exitOK
}
