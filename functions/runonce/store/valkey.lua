#!lua name=runonce___V__
-- The run store's server half (runonce.store.valkey): each function decides and writes one
-- operation atomically, on the server's clock. Loaded with FUNCTION LOAD; __V__ is the digest of
-- this text, so two versions of the library can be loaded side by side during a deploy.
--
-- A record is a hash: each field of the run's record holds its value as JSON text, an instant as
-- {"$dt":MICROSECONDS}; `.fence` holds the fencing token, `.txn` the last transaction that wrote
-- it. A template's instant {"$rel":MICROSECONDS} is that long after the call's `now`. A section
-- of fields arrives as one argument, a JSON object of each name and its stored text.
-- Every function takes ARGV[1] = the key prefix, ARGV[2] = `now` in microseconds ('' = TIME).

local FENCE, TXN = '.fence', '.txn'
local IN_PROGRESS = '"in_progress"'
local SKIPPED = '"skipped"'

local function clock(given)
  local time = redis.call('TIME')
  local server = tonumber(time[1]) * 1000000 + tonumber(time[2])
  if given ~= '' then
    return tonumber(given), server
  end
  return server, server
end

local function number(n)
  return string.format('%.0f', n)
end

local function instant(text)
  if not text then
    return nil
  end
  local n = string.match(text, '^{"%$dt":(%-?%d+)}$')
  return n and tonumber(n)
end

local function at(n)
  return '{"$dt":' .. number(n) .. '}'
end

local function live(lease, now)
  -- lease_live: a record without an instant lease counts as live
  local n = instant(lease)
  return n == nil or n > now
end

local function section(argv, from)
  -- one argument, a JSON object of each field's name and stored text: decoded in C, where
  -- a name and a value per argument cost the client and this function each a step per field
  return cjson.decode(argv[from]), from + 1
end

local function timed(fields, now)
  local out = {}
  for name, value in pairs(fields) do
    local offset = string.match(value, '^{"%$rel":(%-?%d+)}$')
    out[name] = offset and at(now + tonumber(offset)) or value
  end
  return out
end

local function merged(...)
  local out = {}
  for _, fields in ipairs({ ... }) do
    for name, value in pairs(fields) do
      out[name] = value
    end
  end
  return out
end

local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then
    return nil, flat
  end
  local record = {}
  for i = 1, #flat, 2 do
    record[flat[i]] = flat[i + 1]
  end
  return record, flat
end

local function fence_over(server, ...)
  -- the next token: later than every token these records (as loaded; nil: none) had, and not
  -- before the server's clock
  local fence = server
  for i = 1, select('#', ...) do
    local record = select(i, ...)
    local old = tonumber(record and record[FENCE] or '0')
    if old >= fence then
      fence = old + 1
    end
  end
  return fence
end

local function fence_after(server, keys)
  -- fence_over, the keys' tokens read
  local fence = server
  for _, key in ipairs(keys) do
    fence = fence_over(fence, { [FENCE] = redis.call('HGET', key, FENCE) })
  end
  return fence
end

local function name_of(prefix, key)
  return string.sub(key, #prefix + 6)
end

local function unindex(prefix, key)
  local job = redis.call('HGET', key, 'job')
  redis.call('ZREM', prefix .. ':index', name_of(prefix, key))
  if job then
    redis.call('ZREM', prefix .. ':job:' .. job, name_of(prefix, key))
  end
end

local function outlive(index, ttl)
  -- an index lives as long as its longest-lived record (GT: never shortened, never given an
  -- expiry it has not got)
  if ttl == nil then
    redis.call('PERSIST', index)
  else
    redis.call('PEXPIRE', index, ttl, 'GT')
  end
end

local function enlist(index, score, name, ttl)
  -- `name` added to `index`, which outlives it (a new index expires with it)
  local fresh = redis.call('EXISTS', index) == 0
  redis.call('ZADD', index, score, name)
  if fresh and ttl then
    redis.call('PEXPIRE', index, ttl)
  else
    outlive(index, ttl)
  end
end

local function keep(prefix, key, now, record, old)
  -- the key expires at the record's expire_at; the indexes list it, scored by claimed_at. `record`:
  -- the fields that decide it as written (nil: read them); `old`: the record before the write, if
  -- this call loaded it (its index entries, there as long as it is, need no ZADD if unchanged).
  if record == nil then
    local values = redis.call('HMGET', key, 'expire_at', 'claimed_at', 'job')
    record = { expire_at = values[1] or nil, claimed_at = values[2] or nil, job = values[3] or nil }
  end
  local expire = instant(record.expire_at)
  local ttl = nil
  if expire then
    ttl = math.max(1, math.floor((expire - now) / 1000))
    redis.call('PEXPIRE', key, ttl)
  else
    redis.call('PERSIST', key)
  end
  local claimed = instant(record.claimed_at)
  local score = claimed and number(claimed) or '-inf'
  local name = name_of(prefix, key)
  local indexes = { prefix .. ':index' }
  local job = record.job
  if job then
    indexes[2] = prefix .. ':job:' .. job
  end
  local listed = old and old.claimed_at == record.claimed_at and old.job == job
  for _, index in ipairs(indexes) do
    if listed then
      outlive(index, ttl)
    else
      enlist(index, score, name, ttl)
    end
  end
end

local function write(prefix, key, fields, replace, fence, now, txn, old)
  -- `old`: the record as this call loaded it, false if it had none, nil if not loaded
  if replace and old ~= false then
    redis.call('DEL', key)
  end
  local flat = {}
  for name, value in pairs(fields) do
    flat[#flat + 1] = name
    flat[#flat + 1] = value
  end
  flat[#flat + 1], flat[#flat + 2] = FENCE, number(fence) -- last, so no field given can set it
  if txn then
    flat[#flat + 1], flat[#flat + 2] = TXN, txn
  end
  redis.call('HSET', key, unpack(flat))
  local record = nil
  if replace or old == false then
    record = fields
  elseif old then
    record = merged(old, fields)
  end
  keep(prefix, key, now, record, old or nil)
end

local function remove(prefix, key)
  unindex(prefix, key)
  redis.call('DEL', key)
end

local function holds(record, attempt, fence)
  return record ~= nil and record[FENCE] == fence and record.attempt_id == attempt
end

local function rival_of(prefix, lock, run, now)
  -- lock_rival, then lock_held: the run that holds the job lock against `run`, or nil
  local lockrecord = load(lock)
  if lockrecord == nil or lockrecord.lock_holder == run or not live(lockrecord.lease_expires, now) then
    return nil, lockrecord
  end
  local holder = load(prefix .. ':run:' .. cjson.decode(lockrecord.lock_holder))
  if holder ~= nil and holder.status == IN_PROGRESS and holder.attempt_id == lockrecord.lock_attempt_id
    and live(holder.lease_expires, now) then
    return lockrecord.lock_holder, lockrecord
  end
  return nil, lockrecord
end

local function overlapped(rival, lockrecord)
  return { 'overlap', rival, lockrecord.lease_expires or '' }
end

-- claim: KEYS run [lock]; ARGV prefix now run attempt policy, then the templates: the run's
-- fields, a claim's lease fields, the lock's record, and under `skip` a skipped record (a new one
-- is the run's fields and these) and the fields that record a run skipped over its record.
local function claim(keys, argv)
  local prefix, run_key, attempt, policy = argv[1], argv[3], argv[4], argv[5]
  local now, server = clock(argv[2])
  local fields, lease, lockfields, skipped_new, skipped, from
  fields, from = section(argv, 6)
  lease, from = section(argv, from)
  lockfields, from = section(argv, from)
  skipped_new, from = section(argv, from)
  skipped = section(argv, from)
  local run, lock = keys[1], keys[2]
  local record, flat = load(run)
  local lockrecord = nil
  if record ~= nil then
    if record.attempt_id == attempt and record.status == IN_PROGRESS then
      -- this attempt's own claim, whose answer was lost: the same claim again
      local ours = lock and load(lock)
      local locked = ours and ours.lock_attempt_id == attempt and ours[FENCE] == record[FENCE]
      return { 'claim', record[FENCE], record.attempts, record.history and 1 or 0, locked and 1 or 0 }
    end
    if record.status ~= IN_PROGRESS or live(record.lease_expires, now) then
      return { 'held', unpack(flat) }
    end
  end
  if lock then
    local rival
    rival, lockrecord = rival_of(prefix, lock, run_key, now)
    if rival then
      if policy == 'skip' then
        local fence = fence_over(server, record)
        local base = record == nil and merged(fields, skipped_new) or skipped
        local skip = merged(timed(base, now), { skipped_for = rival })
        write(prefix, run, skip, record == nil, fence, now, nil, record or false)
      end
      return overlapped(rival, lockrecord)
    end
  end
  local fence = fence_over(server, record, lockrecord)
  local attempts, reopened = 1, 0
  if record == nil then
    write(prefix, run, timed(merged(fields, lease, { attempts = '1' }), now), true, fence, now, nil, false)
  else
    attempts = tonumber(record.attempts or '0') + 1
    reopened = record.history and 1 or 0
    local taken = { attempts = number(attempts), previous_attempt_id = record.attempt_id or 'null' }
    write(prefix, run, merged(timed(lease, now), taken), false, fence, now, nil, record)
  end
  if lock then
    write(prefix, lock, timed(lockfields, now), true, fence, now, nil, lockrecord or false)
  end
  return { 'claim', number(fence), number(attempts), reopened, lock and 1 or 0 }
end

-- take_lock: KEYS run lock; ARGV prefix now run attempt fence policy call (this call's id, the same
-- when it is sent again after a lost answer, written on the run as `.txn`), then the templates: the
-- run's lock-taken fields, the lock's record, a skipped record's fields, a released claim's fields.
local function take_lock(keys, argv)
  local prefix, run_key, attempt, fence, policy, call = argv[1], argv[3], argv[4], argv[5], argv[6], argv[7]
  local now, server = clock(argv[2])
  local taken, lockfields, skipped, released, from
  taken, from = section(argv, 8)
  lockfields, from = section(argv, from)
  skipped, from = section(argv, from)
  released = section(argv, from)
  local run, lock = keys[1], keys[2]
  local record = load(run)
  if not holds(record, attempt, fence) then
    if record ~= nil and record.attempt_id == attempt and record[TXN] == call then
      -- this call's own write, whose answer was lost: the lock taken, or the overlap it recorded
      local ours = load(lock) or {}
      if record.status == IN_PROGRESS and ours.lock_attempt_id == attempt and ours[FENCE] == record[FENCE] then
        return { 'claim', record[FENCE] }
      end
      if record.status == SKIPPED and record.skipped_for then
        return overlapped(record.skipped_for, ours)
      end
      if record.status == IN_PROGRESS and record.released_at and ours.lock_holder
        and not live(record.lease_expires, now) then
        return overlapped(ours.lock_holder, ours)
      end
    end
    return { 'held' }
  end
  local rival, lockrecord = rival_of(prefix, lock, run_key, now)
  local next_fence = fence_over(server, record, lockrecord)
  if rival == nil then
    write(prefix, run, timed(taken, now), false, next_fence, now, call, record)
    local lease = { lock_attempt_id = record.attempt_id, lease_expires = record.lease_expires,
      expire_at = record.expire_at }
    write(prefix, lock, merged(timed(lockfields, now), lease), true, next_fence, now, nil, lockrecord or false)
    return { 'claim', number(next_fence) }
  end
  if policy == 'skip' then
    write(prefix, run, merged(timed(skipped, now), { skipped_for = rival }), false, next_fence, now, call, record)
  else
    write(prefix, run, timed(released, now), false, next_fence, now, call, record)
  end
  return overlapped(rival, lockrecord)
end

local function enter(prefix, index, id, entry, fence, now)
  -- a completion's entry in its job's completions (Run.previous): a record of its own, listed
  -- in the job's completions set, whose members (ids) sort as their schedule times
  write(prefix, prefix .. ':run:' .. id, entry, true, fence, now, nil, nil)
  local expire = instant(entry.expire_at)
  enlist(prefix .. ':done:' .. index, 0, id, expire and math.max(1, math.floor((expire - now) / 1000)))
end

-- finish (complete, fail, hold, a reopened run's release): KEYS run [lock]; ARGV prefix now
-- attempt fence status lock_mode update [index id entry]: the update written if the claim still
-- holds the run, and the lock it holds freed ('free') or held as long as the new lease ('keep'),
-- and (a completion) the entry `id` entered in the job's completions `index`. 1 if written, or
-- if the record is already this attempt's with `status`; 0 if the claim was lost.
local function finish(keys, argv)
  local prefix, attempt, fence, status, mode = argv[1], argv[3], argv[4], argv[5], argv[6]
  local now, server = clock(argv[2])
  local update = timed(section(argv, 7), now)
  local run, lock = keys[1], keys[2]
  local record = load(run)
  if not holds(record, attempt, fence) then
    return (record ~= nil and record.attempt_id == attempt and record.status == status) and 1 or 0
  end
  local lockrecord = lock and load(lock)
  local ours = lockrecord and lockrecord[FENCE] == fence
  local next_fence = fence_over(server, record, lockrecord)
  write(prefix, run, update, false, next_fence, now, nil, record)
  if argv[8] then
    enter(prefix, argv[8], argv[9], timed(section(argv, 10), now), next_fence, now)
  end
  if ours and mode == 'keep' then
    write(prefix, lock, { lease_expires = update.lease_expires }, false, next_fence, now, nil, lockrecord)
  elseif ours then
    remove(prefix, lock)
  end
  return 1
end

-- release: KEYS run [lock]; ARGV prefix now attempt fence: the record deleted (and the lock it
-- holds freed) if the claim still holds the run. 1 if deleted or already gone, 0 if lost.
local function release(keys, argv)
  local prefix, attempt, fence = argv[1], argv[3], argv[4]
  local run, lock = keys[1], keys[2]
  local record = load(run)
  if not holds(record, attempt, fence) then
    return record == nil and 1 or 0
  end
  local lockrecord = lock and load(lock)
  if lockrecord and lockrecord[FENCE] == fence then
    remove(prefix, lock)
  end
  remove(prefix, run)
  return 1
end

-- note: KEYS key; ARGV prefix now fields: the record replaced. annotate: the fields added to an
-- existing record; 0 if it has none.
local function note(keys, argv)
  local now, server = clock(argv[2])
  write(argv[1], keys[1], timed(section(argv, 3), now), true, fence_after(server, keys), now)
  return 1
end

local function annotate(keys, argv)
  local now, server = clock(argv[2])
  if redis.call('EXISTS', keys[1]) == 0 then
    return 0
  end
  write(argv[1], keys[1], timed(section(argv, 3), now), false, fence_after(server, keys), now)
  return 1
end

-- find: KEYS index; ARGV prefix now min_score: the records the index lists from min_score on, as
-- name, field count, fields...; members whose record expired are pruned.
local function find(keys, argv)
  local prefix, index = argv[1], keys[1]
  local out = {}
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', index, argv[3], '+inf')) do
    local _, flat = load(prefix .. ':run:' .. name)
    if #flat == 0 then
      redis.call('ZREM', index, name)
    else
      out[#out + 1] = name
      out[#out + 1] = #flat
      for _, item in ipairs(flat) do
        out[#out + 1] = item
      end
    end
  end
  return out
end

-- previous: KEYS set; ARGV prefix now after last: the first entry of completions `set` whose id
-- is after `after` and at most `last` (ids sort newest first: the latest run before `after`'s) and
-- whose record still exists (members whose record expired are removed on the way): its fields,
-- or an empty list.
local function previous(keys, argv)
  local prefix, after, last = argv[1], argv[3], argv[4]
  local set = keys[1]
  while true do
    local found = redis.call('ZRANGEBYLEX', set, '(' .. after, '[' .. last, 'LIMIT', 0, 1)
    if #found == 0 then
      return {}
    end
    local record, flat = load(prefix .. ':run:' .. found[1])
    if record then
      return flat
    end
    redis.call('ZREM', set, found[1])
  end
end

-- snapshot: KEYS keys; ARGV prefix now: now, then each key's field count and fields.
local function snapshot(keys, argv)
  local now = clock(argv[2])
  local out = { number(now) }
  for _, key in ipairs(keys) do
    local _, flat = load(key)
    out[#out + 1] = #flat
    for _, item in ipairs(flat) do
      out[#out + 1] = item
    end
  end
  return out
end

-- commit: KEYS keys; ARGV prefix now txn, then per key: the fence it was read with ('' = no
-- record, '*' = not read), what to do ('' nothing, 'replace', 'merge') and the fields. Refused
-- ('conflict') if any key read has changed since, unless this very transaction wrote it.
local function commit(keys, argv)
  local prefix, txn = argv[1], argv[3]
  local now, server = clock(argv[2])
  local plan, from, conflict, landed = {}, 4, false, nil
  for i, key in ipairs(keys) do
    local seen, action = argv[from], argv[from + 1]
    local fields
    fields, from = section(argv, from + 2)
    plan[i] = { key = key, action = action, fields = fields }
    local fence = redis.call('HGET', key, FENCE) or ''
    if seen ~= '*' and fence ~= seen then
      conflict = true
    end
    if action ~= '' and redis.call('HGET', key, TXN) == txn then
      landed = fence
    end
  end
  if landed then
    return { 'done', landed }
  end
  if conflict then
    return { 'conflict' }
  end
  local written = {}
  for _, step in ipairs(plan) do
    if step.action ~= '' then
      written[#written + 1] = step.key
    end
  end
  local fence = fence_after(server, written)
  for _, step in ipairs(plan) do
    if step.action ~= '' then
      write(prefix, step.key, step.fields, step.action == 'replace', fence, now, txn)
    end
  end
  return { 'done', number(fence) }
end

-- The load-time environment has no `pairs`: each function registered by name.
redis.register_function('runonce___V___claim', claim)
redis.register_function('runonce___V___take_lock', take_lock)
redis.register_function('runonce___V___finish', finish)
redis.register_function('runonce___V___release', release)
redis.register_function('runonce___V___note', note)
redis.register_function('runonce___V___annotate', annotate)
redis.register_function('runonce___V___find', find)
redis.register_function('runonce___V___snapshot', snapshot)
redis.register_function('runonce___V___previous', previous)
redis.register_function('runonce___V___commit', commit)
