package prepare

import (
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxCachedSchemas bounds the caller-specific schemas kept compiled. Their
// number is that of distinct offered subsets of each chooser's values,
// which is small in practice; past the bound a schema is compiled per call.
const maxCachedSchemas = 256

// schemaCache compiles caller-specific schemas once per distinct text.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*jsonschema.Schema
}

func (c *schemaCache) get(tool, text string) (*jsonschema.Schema, error) {
	key := tool + "\x00" + text
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := compileSchema(tool, text)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*jsonschema.Schema{}
	}
	if len(c.m) < maxCachedSchemas {
		c.m[key] = s
	}
	return s, nil
}
