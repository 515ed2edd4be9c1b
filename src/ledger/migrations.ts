/**
 * Numbered schema migrations. Append new ones; never edit a released one. Tables are
 * append-only: an experiment's fate is the set of rows that exist for it.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: runs, experiments, trials, decisions, notes
  `
  CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    tag TEXT NOT NULL UNIQUE,
    branch TEXT NOT NULL,
    program_path TEXT NOT NULL,
    program_name TEXT NOT NULL,
    metric TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('minimize', 'maximize')),
    base_commit TEXT NOT NULL,
    protected_hashes TEXT NOT NULL,
    seed INTEGER NOT NULL,
    started_at TEXT NOT NULL
  );
  CREATE TABLE experiments (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    n INTEGER NOT NULL,
    agent TEXT NOT NULL,
    parent_commit TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    ref TEXT NOT NULL,
    hypothesis TEXT NOT NULL,
    mechanism TEXT,
    expected TEXT,
    params TEXT,
    diff_files INTEGER NOT NULL,
    diff_insertions INTEGER NOT NULL,
    diff_deletions INTEGER NOT NULL,
    usage TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (run_id, n)
  );
  CREATE TABLE trial_starts (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    attempt INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    command TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    budget_ms INTEGER NOT NULL,
    env TEXT NOT NULL,
    started_at TEXT NOT NULL,
    UNIQUE (experiment_id, attempt)
  );
  CREATE TABLE trial_results (
    trial_id INTEGER PRIMARY KEY REFERENCES trial_starts(id),
    status TEXT NOT NULL,
    reason TEXT,
    exit_code INTEGER,
    signal TEXT,
    wall_s REAL NOT NULL,
    cpu_s REAL NOT NULL,
    peak_rss_mb REAL NOT NULL,
    metrics TEXT NOT NULL,
    self_reported INTEGER NOT NULL,
    stdout_path TEXT NOT NULL,
    stderr_path TEXT NOT NULL,
    log_dir TEXT NOT NULL,
    log_tail TEXT NOT NULL,
    finished_at TEXT NOT NULL
  );
  CREATE TABLE decisions (
    experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id),
    action TEXT NOT NULL CHECK (action IN ('keep', 'discard', 'crash', 'reject')),
    reason TEXT NOT NULL,
    metric REAL,
    mechanism_confirmed INTEGER,
    decided_at TEXT NOT NULL
  );
  CREATE TABLE notes (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    experiment_id INTEGER REFERENCES experiments(id),
    text TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX experiments_run ON experiments(run_id, n);
  CREATE INDEX trial_starts_experiment ON trial_starts(experiment_id);
  `,
  // 2: the program contract a run started with (see src/program/contract.ts)
  `
  ALTER TABLE runs ADD COLUMN contract TEXT;
  `,
  // 3: the progress metric's learning curve of each trial (for pruning against the best's)
  `
  ALTER TABLE trial_results ADD COLUMN progress TEXT;
  `,
  // 4: organizations and slots: the role that proposed an experiment, the experiment a rebased
  // candidate came from, the slot a trial ran on, and harness sessions (for slot utilization)
  `
  ALTER TABLE experiments ADD COLUMN role TEXT;
  ALTER TABLE experiments ADD COLUMN rebase_of INTEGER;
  ALTER TABLE trial_starts ADD COLUMN slot INTEGER;
  CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    slots INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL
  );
  CREATE INDEX sessions_run ON sessions(run_id, id);
  `,
  // 5: how each harness session confined trials and researchers ("bubblewrap 0.8.0", or
  // "unsandboxed: <why>"), so status and reports can say that a run was not sandboxed
  `
  ALTER TABLE sessions ADD COLUMN sandbox TEXT;
  `,
  // 6: the git blob of the program.md a run started from (the committed contract, docs/program.md)
  `
  ALTER TABLE runs ADD COLUMN program_blob TEXT;
  `,
  // 7: results another tool recorded before autolab (autoresearch's results.tsv, pi-autoresearch's
  // log.jsonl): claims shown as prior history, never measurements of a run (docs/migrate.md)
  `
  CREATE TABLE imported_results (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    seq INTEGER NOT NULL,
    commit_sha TEXT NOT NULL,
    metrics TEXT NOT NULL,
    status TEXT NOT NULL,
    description TEXT NOT NULL,
    segment INTEGER,
    imported_at TEXT NOT NULL,
    UNIQUE (source, seq)
  );
  `,
  // 8: iteration hooks (program.md `hooks:`): one row per finished hook run, before a proposal
  // or after a decision, keyed by the experiment number (a before hook precedes its row)
  `
  CREATE TABLE hook_runs (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    n INTEGER NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('before', 'after')),
    command TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    exit_code INTEGER,
    wall_s REAL NOT NULL,
    output TEXT NOT NULL,
    log_dir TEXT NOT NULL,
    finished_at TEXT NOT NULL
  );
  CREATE INDEX hook_runs_run ON hook_runs(run_id, n);
  `,
  // 9: the tree frontier (program.md frontier:, docs/loop.md): a candidate that credibly beat the
  // kept node it grew from, but not the best, is kept in the tree (1) while its action stays
  // discard (the ratchet did not move); null everywhere else
  `
  ALTER TABLE decisions ADD COLUMN tree_node INTEGER;
  `,
  // 10: the advisor's answers (src/core/advisor.ts, docs/advisor.md): ideas, a stop verdict or
  // garbage, with what triggered it and how far the run was
  `
  CREATE TABLE advice (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    trigger TEXT NOT NULL,
    decided INTEGER NOT NULL,
    after_n INTEGER NOT NULL,
    agent TEXT NOT NULL,
    verdict TEXT NOT NULL,
    ideas TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX advice_run ON advice(run_id, id);
  `,
  // 11: the context each researcher was shown when it proposed (src/core/views.ts buildContext),
  // written with its experiment row in one transaction: the trajectory export's "what it saw"
  // (docs/learning.md). Absent for experiments before it, the baseline, merges and adopted candidates.
  `
  CREATE TABLE proposal_contexts (
    experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id),
    text TEXT NOT NULL
  );
  `,
  // 12: the run's secret seed key (src/core/trial-seeds.ts, docs/security.md "Seeds the candidate
  // cannot predict"): every trial seed of the run derives from it; null for runs before it (their
  // trials ran with seed + k)
  `
  ALTER TABLE runs ADD COLUMN seed_key TEXT;
  `,
];
