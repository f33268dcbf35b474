package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/tools"
)

// workspacesReport is what /readyz says about the tenants' workspaces:
// how their quotas are enforced and whether they share the audit
// database's filesystem. It names no tenant and no path (/readyz is
// unauthenticated) and never fails readiness.
type workspacesReport struct {
	// Quota is btrfs-qgroup or accounting when every workspace has that
	// mode, else mixed.
	Quota string `json:"quota"`
	// SharesAuditFilesystem is set for a SQLite audit database: true
	// when a workspace is on its filesystem. Unknown (absent) for
	// PostgreSQL.
	SharesAuditFilesystem *bool `json:"shares_audit_filesystem,omitempty"`
}

// prepareWorkspace creates a missing workspace: as a btrfs subvolume when
// its parent folder is on btrfs (filled from the seed, if any, before it
// takes the workspace's name), else from its seed.
func prepareWorkspace(t config.Tenant) (subvolume bool, err error) {
	if !quota.CanCreateSubvolume(t.Workspace) {
		return false, seedWorkspace(t)
	}
	if t.Seed == "" {
		return quota.CreateWorkspace(t.Workspace)
	}
	var b [8]byte
	rand.Read(b[:])
	tmp := filepath.Join(filepath.Dir(t.Workspace), ".seed-"+hex.EncodeToString(b[:]))
	if ok, err := quota.CreateWorkspace(tmp); err != nil || !ok {
		return false, errors.Join(err, seedWorkspace(t))
	}
	if err := os.CopyFS(tmp, os.DirFS(t.Seed)); err != nil {
		os.RemoveAll(tmp) // an empty subvolume is removed like a folder
		return false, err
	}
	if err := os.Rename(tmp, t.Workspace); err != nil {
		os.RemoveAll(tmp)
		return false, err
	}
	return true, nil
}

// startQuotas gives every tenant's workspace its quota (the mechanism
// chosen per workspace, reported in the log) and measures each once.
func (g *Gateway) startQuotas(envs map[string]*tools.Env) {
	names := make([]string, 0, len(envs))
	for name := range envs {
		names = append(names, name)
	}
	sort.Strings(names)
	meters := make([]*quota.Meter, len(names))
	errs := make([]error, len(names))
	took := make([]time.Duration, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // first measurements in parallel, a few at a time
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			begin := time.Now()
			meters[i], errs[i] = quota.Open(envs[name].Workspace.Dir(), g.cfg.WorkspaceBytes(name), g.log.With("tenant", name))
			took[i] = time.Since(begin)
		}()
	}
	wg.Wait()
	modes := map[quota.Mode]bool{}
	for i, name := range names {
		m := meters[i]
		envs[name].Workspace.SetQuota(m)
		g.closers = append(g.closers, m.Close)
		modes[m.Mode()] = true
		attrs := []any{"tenant", name, "mode", string(m.Mode()), "limit_bytes", m.Limit(), "used_bytes", m.Used(),
			"measured_in", took[i].Round(time.Millisecond)}
		if m.Reason() != "" {
			attrs = append(attrs, "reason", m.Reason())
		}
		if m.Mode() == quota.Accounting {
			attrs = append(attrs, "enforcement", "soft: measured by the gateway")
		}
		g.log.Info("workspace quota", attrs...)
		if errs[i] != nil {
			g.log.Error("workspace not measured: counted as full until a measurement succeeds", "tenant", name, "err", errs[i])
		}
	}
	g.wsReport.Quota = string(quota.Accounting)
	switch {
	case len(modes) > 1:
		g.wsReport.Quota = "mixed"
	case modes[quota.BtrfsQgroup]:
		g.wsReport.Quota = string(quota.BtrfsQgroup)
	}
}

// checkAuditFilesystem says, in the start log and /readyz, whether the
// SQLite audit database shares a filesystem with a workspace: a tenant
// filling it would make every call of every tenant fail closed.
func (g *Gateway) checkAuditFilesystem() {
	a := g.cfg.Audit
	if a.Driver != "sqlite" {
		return // PostgreSQL: where its data lives is unknown here
	}
	shared := false
	if a.DSN != ":memory:" {
		db, err := quota.FilesystemID(filepath.Dir(a.DSN))
		if err != nil {
			g.log.Warn("cannot tell whether the audit database shares a filesystem with the workspaces", "err", err)
			return
		}
		var tenants []string
		for name, t := range g.cfg.Tenants {
			if id, err := quota.FilesystemID(t.Workspace); err == nil && id == db {
				tenants = append(tenants, name)
			}
		}
		sort.Strings(tenants)
		if shared = len(tenants) > 0; shared {
			g.log.Warn("the audit database shares a filesystem with tenant workspaces: a workspace that fills it stops every call of every tenant (audit log unavailable). "+
				"Put the workspaces, or the audit database, on a filesystem of their own (docs/security-model.md \"Workspace quotas\")",
				"tenants", tenants, "audit_dsn", a.DSN)
		}
	}
	g.wsReport.SharesAuditFilesystem = &shared
}

// workspacesReady is the workspaces member of /readyz.
func (g *Gateway) workspacesReady() any {
	if g.wsReport.Quota == "" {
		return nil
	}
	r := g.wsReport
	return &r
}
