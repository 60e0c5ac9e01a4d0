-- A stock sysbench OLTP workload (named by $BENCH_WORKLOAD, e.g. oltp_write_only) that also
-- counts, per SQL error number, the errors sysbench survived. sysbench itself only reports
-- one "ignored errors" total, which cannot tell a deadlock (a normal outcome of
-- certification) from a lost connection or a node refusing queries, and the harness must
-- report those separately. Run it with --mysql-ignore-errors=all so that every error
-- restarts the transaction (and lost connections are reconnected) instead of ending the run.

local workload = os.getenv("BENCH_WORKLOAD")
if workload == nil or workload == "" then
   error("set BENCH_WORKLOAD to the sysbench script to run, e.g. oltp_write_only")
end
require(workload)

local counts = {}

-- oltp_common installs a hook that re-prepares statements after a reconnect: keep it.
local restart_hook = sysbench.hooks.before_restart_event
function sysbench.hooks.before_restart_event(errdesc)
   local errno = tonumber(errdesc.sql_errno) or -1
   counts[errno] = (counts[errno] or 0) + 1
   if restart_hook then
      restart_hook(errdesc)
   end
end

-- Each worker thread has its own Lua state, so each prints its own counts; report.py sums
-- the lines.
local inner_thread_done = thread_done
function thread_done(...)
   for errno, n in pairs(counts) do
      print(string.format("bench-error-count errno=%d count=%d", errno, n))
   end
   if inner_thread_done then
      return inner_thread_done(...)
   end
end
