// Package skill implements the built-in skill tool: a tenant's library of
// instructions ("skills") that a model loads by name.
//
// A library is a folder with one sub-folder per skill, each holding a
// SKILL.md whose YAML front matter names the skill (the folder's name),
// describes it and gives its version, followed by the instructions:
//
//	---
//	name: release-notes
//	description: Write release notes from the git log.
//	version: 1.2.0
//	---
//	1. Run git log ...
//
// The tool is a tools.Chooser: the skills offered to a caller (each judged
// by the availability policy with input.choice) become the enum of its
// "name" argument, in the schema that caller is shown and held to.
// Prepare reads the skill once and shows policy a "skill" resource with
// its name, version and the SHA-256 digest of its SKILL.md, so the audit
// log records exactly which content was served. Run reads the file again
// through the same root and serves it only when it is the same file with
// the same digest; anything else fails with tools.ErrTargetChanged.
package skill
