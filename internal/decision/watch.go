package decision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the policy whenever anything under the policy folder
// changes, once changes have settled for the debounce period. It watches the
// folder and every non-hidden subfolder, including ones created later. Any
// event counts, hidden names included, because Kubernetes config maps
// update by swapping a hidden ..data link. Evaluations are never blocked: a
// reload builds off to the side and swaps in. Call Load first (Watch
// reloads once after it starts watching, so changes in between are not
// lost); Watch returns nil when ctx ends, or an error if watching cannot
// start.
//
// A bundle URL is polled instead (see BundleOptions); a bundle file is
// reloaded when anything in its folder changes.
func (e *Engine) Watch(ctx context.Context) error {
	if e.bundle != nil && e.bundle.IsURL() {
		return e.pollBundle(ctx)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("decision: watch policy folder: %w", err)
	}
	defer w.Close()
	if e.bundle != nil {
		// Only the bundle's own folder: it is usually replaced by rename.
		err = w.Add(filepath.Dir(e.bundle.Location))
	} else {
		err = addTree(w, e.dir)
	}
	if err != nil {
		return fmt.Errorf("decision: watch policy folder: %w", err)
	}

	// One reload once watching: a change made between Load and now has no
	// event. An unchanged folder keeps its revision.
	timer := time.NewTimer(e.debounce)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("decision: policy watcher closed")
			}
			if e.bundle == nil && ev.Has(fsnotify.Create) && !hidden(filepath.Base(ev.Name)) {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					if err := addTree(w, ev.Name); err != nil {
						e.log.Warn("cannot watch new policy subfolder", "dir", ev.Name, "err", err)
					}
				}
			}
			timer.Reset(e.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("decision: policy watcher closed")
			}
			// An overflow loses events: reload to be sure.
			e.log.Warn("policy watcher error; reloading", "err", err)
			timer.Reset(e.debounce)
		case <-timer.C:
			// Load logs, counts and records its own failures.
			_ = e.Load(ctx)
		}
	}
}

// addTree watches dir and its non-hidden subfolders.
func addTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil // vanished meanwhile; its parent's events cover it
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && hidden(d.Name()) {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }
