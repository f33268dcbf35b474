package gateway

import (
	"context"
	"os"

	"github.com/toolgate/toolgate/internal/config"

	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// openShadow loads the shadow policy (policy.shadow), if any. A shadow that
// does not load is logged and keeps trying on reload; until it loads,
// shadow verdicts are "error". Its engine has no metrics of its own (they
// would collide with the enforced engine's); the shadow's divergence
// metric says what matters.
func (g *Gateway) openShadow(ctx context.Context) (*pipeline.Shadow, error) {
	if g.cfg.Policy.Shadow == "" {
		return nil, nil
	}
	log := g.log.With("policy", "shadow")
	opts := decision.Options{Dir: g.cfg.Policy.Shadow, Logger: log, Debounce: g.cfg.Policy.ReloadDebounce}
	if fi, err := os.Stat(g.cfg.Policy.Shadow); config.IsURL(g.cfg.Policy.Shadow) || (err == nil && !fi.IsDir()) {
		// A bundle, with the enforced policy's poll and signing settings.
		shadowCfg := *g.cfg
		shadowCfg.Policy.Bundle = g.cfg.Policy.Shadow
		b, err := bundleOptions(&shadowCfg)
		if err != nil {
			return nil, err
		}
		opts.Dir, opts.Bundle = "", b
	}
	eng := decision.NewEngine(opts)
	if err := eng.Load(ctx); err != nil {
		log.Error("shadow policy did not load; shadow verdicts are errors until it does", "err", err)
	}
	return pipeline.NewShadow(eng, g.registry), nil
}
