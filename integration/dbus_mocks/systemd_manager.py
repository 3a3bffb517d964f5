'''A test double of systemd's manager (org.freedesktop.systemd1) for hoist's
integration tests: the methods hoist calls, on a python-dbusmock object.

Parameters (JSON, dbusmock -p):
  results:         {unit: job result}   JobRemoved's result ("done" when absent)
  failed_jobs:     {unit: [n, ...]}     which of a unit's jobs (1 = its first) end 'failed' whatever `results` says
  delays:          {unit: ms}           before JobRemoved is emitted (-1: never)
  slow_starts:     {unit: ms}           StartUnit answers only after this long (the caller waits for the reply)
  early:           [unit]               JobRemoved is emitted before the method returns
  missing:         [unit]               the method fails with NoSuchUnit
  service_results: {unit: Result}       the unit's Service.Result property
  dies:            {unit: ms}           after a job that succeeded, the unit fails this much later
  flaps:           {unit: ms}           after a job that succeeded, systemd restarts the unit this often
                                        (NRestarts counts up, ActiveEnterTimestampMonotonic moves)
  sick_jobs:       [n, ...]             which of a unit's jobs (1 = its first) `dies` and `flaps` apply to;
                                        all when absent (a rollback's restart starts a healthy old version)
  active_since:    {unit: s}            units active before any job, entered that many seconds ago (a boot)
  stop_kills:      {unit: pidfile}      StopUnit sends SIGTERM to the pid in that file and waits for it to end (the
                                        process that stands in for the unit: a k3s server's datastore writer)
  start_runs:      {unit: argv}         StartUnit and RestartUnit start argv (detached, output to the pidfile's
                                        name + ".log") when the process of the unit's stop_kills pidfile is not
                                        running, and write its pid there: a k3s server's embedded etcd, back after
                                        a stop
  sysext_root:     DIR                  the host root (the harness passes it): a job of systemd-sysext.service
                                        refreshes the extensions linked there (see refresh_sysext)

Units carry ActiveState, SubState, ActiveEnterTimestampMonotonic (CLOCK_MONOTONIC
microseconds, the clock systemd uses) and, for services, NRestarts and Result.

Every call is logged by dbusmock ("<time> RestartUnit "k3s.service" "replace"").
Manager.Reboot is implemented only to be caught being called: hoist must never
call it.
'''

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import dbus
from gi.repository import GLib

from dbusmock import mockobject

BUS_NAME = 'org.freedesktop.systemd1'
MAIN_OBJ = '/org/freedesktop/systemd1'
MAIN_IFACE = 'org.freedesktop.systemd1.Manager'
UNIT_IFACE = 'org.freedesktop.systemd1.Unit'
SERVICE_IFACE = 'org.freedesktop.systemd1.Service'
SYSTEM_BUS = True


def load(mock, parameters):
    mock.next_job = 1
    mock.results = dict(parameters.get('results', {}))
    mock.failed_jobs = {unit: list(numbers) for unit, numbers in parameters.get('failed_jobs', {}).items()}
    mock.delays = dict(parameters.get('delays', {}))
    mock.slow_starts = dict(parameters.get('slow_starts', {}))
    mock.early = list(parameters.get('early', []))
    mock.missing = list(parameters.get('missing', []))
    mock.service_results = dict(parameters.get('service_results', {}))
    mock.dies = dict(parameters.get('dies', {}))
    mock.flaps = dict(parameters.get('flaps', {}))
    mock.sick_jobs = parameters.get('sick_jobs')
    mock.sysext_root = parameters.get('sysext_root')
    mock.stop_kills = dict(parameters.get('stop_kills', {}))
    mock.start_runs = dict(parameters.get('start_runs', {}))
    mock.sysext_merged = []
    mock.jobs_of = {}
    mock.AddProperties(MAIN_IFACE, {'Version': 'v252'})
    for name, seconds in parameters.get('active_since', {}).items():
        settle_unit(mock, name, 'done', entered=now_usec() - int(seconds * 1e6))


def now_usec():
    return int(time.monotonic() * 1e6)


def unit_path(name):
    escaped = ''.join(c if c.isalnum() else f'_{ord(c):02x}' for c in name)
    return f'{MAIN_OBJ}/unit/{escaped}'


def settle_unit(self, name, result, entered=None):
    path = unit_path(name)
    failed = result not in ('done', 'skipped')
    props = {'Id': name, 'ActiveState': 'failed' if failed else 'active',
             'SubState': 'failed' if failed else 'running',
             'ActiveEnterTimestampMonotonic': dbus.UInt64(entered if entered is not None else now_usec())}
    if path not in mockobject.objects:
        self.AddObject(path, UNIT_IFACE, props, [])
        if name.endswith('.service'):
            mockobject.objects[path].AddProperties(
                SERVICE_IFACE, {'Result': self.service_results.get(name, 'exit-code' if failed else 'success'),
                                'NRestarts': dbus.UInt32(0)})
    else:
        mockobject.objects[path].UpdateProperties(UNIT_IFACE, props)
        if name.endswith('.service'):
            # Each job's end sets the service's Result, as systemd does.
            result_property = self.service_results.get(name, 'exit-code' if failed else 'success')
            mockobject.objects[path].UpdateProperties(SERVICE_IFACE, {'NRestarts': dbus.UInt32(0),
                                                                      'Result': result_property})


def sicken(self, name):
    """What happens to a unit after its job succeeded: `dies` or `flaps`."""
    path = unit_path(name)
    job_number = self.jobs_of[name]
    if self.sick_jobs is not None and job_number not in self.sick_jobs:
        return

    def die():
        if self.jobs_of[name] == job_number:
            mockobject.objects[path].UpdateProperties(UNIT_IFACE, {'ActiveState': 'failed', 'SubState': 'failed'})
            mockobject.objects[path].UpdateProperties(SERVICE_IFACE, {'Result': 'exit-code'})
        return False

    def flap():
        if self.jobs_of[name] != job_number:
            return False
        unit = mockobject.objects[path]
        restarts = unit.Get(SERVICE_IFACE, 'NRestarts') + 1
        unit.UpdateProperties(SERVICE_IFACE, {'NRestarts': dbus.UInt32(restarts)})
        unit.UpdateProperties(UNIT_IFACE, {'ActiveEnterTimestampMonotonic': dbus.UInt64(now_usec())})
        return True

    if name in self.dies:
        GLib.timeout_add(int(self.dies[name]), die)
    if name in self.flaps:
        GLib.timeout_add(int(self.flaps[name]), flap)


# systemd-sysext 252's directories, in its order of precedence.
SYSEXT_DIRS = ['etc/extensions', 'run/extensions', 'var/lib/extensions', 'usr/local/lib/extensions',
               'usr/lib/extensions']
RELEASE_DIR = 'usr/lib/extension-release.d'


def in_root(root, path, hops=40):
    """`path` (inside `root`) with its last component's symlinks resolved inside `root`, as the host would."""
    while hops > 0 and os.path.islink(path):
        target = os.readlink(path)
        path = os.path.join(root, target.lstrip('/')) if target.startswith('/') else \
            os.path.join(os.path.dirname(path), target)
        hops -= 1
    return path


def refresh_sysext(self):
    """What the reload of systemd-sysext.service does to the host root's /usr, decided by the real systemd-sysext.

    The real `systemd-sysext refresh --root` cannot be pointed at the scratch host root: systemd 252 does not
    resolve hoist's host-absolute links inside --root ("No extensions found"), and its merge is an overlay mount
    that the test's own mount namespace would keep. So the linked images are copied, as the host resolves the
    links, into a scratch root beside a copy of the host's os-release; the real `systemd-sysext merge --root` merges
    them in a private mount namespace (a tmpfs on /run, its workspace); and the release files its overlay shows
    under /usr/lib/extension-release.d are what this leaves in the host root's, in place of those of the last
    refresh: an image systemd skips leaves none. Without root, unshare or systemd-sysext, every image's release
    file is taken as merged."""
    root = self.sysext_root
    shown = os.path.join(root, RELEASE_DIR)
    for path in self.sysext_merged:
        if os.path.lexists(path):
            os.unlink(path)
    self.sysext_merged = []
    work = tempfile.mkdtemp(prefix='sysext-refresh.')
    try:
        scratch = os.path.join(work, 'root')
        out = os.path.join(work, 'merged')
        os.makedirs(os.path.join(scratch, 'etc/extensions'))
        os.makedirs(os.path.join(scratch, 'usr/lib'))
        os.makedirs(out)
        for release in ('etc/os-release', 'usr/lib/os-release'):
            source = in_root(root, os.path.join(root, release))
            if os.path.isfile(source):
                shutil.copy2(source, os.path.join(scratch, 'etc/os-release'))
                break
        for directory in SYSEXT_DIRS:
            here = os.path.join(root, directory)
            if not os.path.isdir(here) or os.path.islink(here):
                continue
            for name in sorted(os.listdir(here)):
                source = in_root(root, os.path.join(here, name))
                copy = os.path.join(scratch, 'etc/extensions', name)
                if os.path.lexists(copy):
                    continue
                if os.path.isdir(source):
                    shutil.copytree(source, copy, symlinks=True)
                elif os.path.isfile(source):
                    shutil.copy2(source, copy)
        real = os.geteuid() == 0 and shutil.which('systemd-sysext') and shutil.which('unshare')
        if real:
            script = (f'mount --make-rshared / && mount -t tmpfs tmpfs /run && '
                      f'systemd-sysext merge --root="$1" >&2; '
                      f'if [ -d "$1/{RELEASE_DIR}" ]; then cp -a "$1/{RELEASE_DIR}/." "$2/"; fi')
            subprocess.run(['unshare', '-m', 'sh', '-c', script, 'sh', scratch, out], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            for name in os.listdir(os.path.join(scratch, 'etc/extensions')):
                image = os.path.join(scratch, 'etc/extensions', name)
                releases = os.path.join(image, RELEASE_DIR)
                if os.path.isdir(releases):
                    for release in os.listdir(releases):
                        shutil.copy2(os.path.join(releases, release), out)
        if os.listdir(out):
            os.makedirs(shown, exist_ok=True)
        for name in sorted(os.listdir(out)):
            shutil.copy2(os.path.join(out, name), os.path.join(shown, name))
            self.sysext_merged.append(os.path.join(shown, name))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def emit_removed(self, job_id, job, name, result):
    self.EmitSignal(MAIN_IFACE, 'JobRemoved', 'uoss', [dbus.UInt32(job_id), dbus.ObjectPath(job), name, result])
    return False


def queue_job(self, name):
    if name in self.missing:
        raise dbus.exceptions.DBusException(f'Unit {name} not found.', name='org.freedesktop.systemd1.NoSuchUnit')
    job_id = self.next_job
    self.next_job += 1
    job = f'{MAIN_OBJ}/job/{job_id}'
    self.jobs_of[name] = self.jobs_of.get(name, 0) + 1
    result = 'failed' if self.jobs_of[name] in self.failed_jobs.get(name, []) else self.results.get(name, 'done')
    if result == 'done' and name == 'systemd-sysext.service' and self.sysext_root:
        refresh_sysext(self)
    settle_unit(self, name, result)
    if result == 'done':
        sicken(self, name)
    if name in self.early:
        emit_removed(self, job_id, job, name, result)
    else:
        delay = int(self.delays.get(name, 0))
        if delay >= 0:
            GLib.timeout_add(delay, emit_removed, self, job_id, job, name, result)
    return dbus.ObjectPath(job)


def start_process(self, name):
    """start_runs: the unit's stand-in process, started again when it is not running."""
    argv, pidfile = self.start_runs.get(name), self.stop_kills.get(name)
    if not argv or not pidfile:
        return
    if os.path.exists(pidfile):
        try:
            os.kill(int(open(pidfile).read()), 0)
            return
        except (ProcessLookupError, ValueError):
            pass
    with open(pidfile + '.log', 'ab') as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    # Reaped when it ends, so that its pid stops answering (StopUnit and the next start look at it).
    threading.Thread(target=process.wait, daemon=True).start()
    with open(pidfile, 'w') as f:
        f.write(str(process.pid))


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def RestartUnit(self, name, _mode):
    start_process(self, str(name))
    return queue_job(self, str(name))


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def ReloadOrRestartUnit(self, name, _mode):
    return queue_job(self, str(name))


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def StartUnit(self, name, _mode):
    if str(name) in self.slow_starts:
        time.sleep(int(self.slow_starts[str(name)]) / 1000)
    start_process(self, str(name))
    return queue_job(self, str(name))


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def StopUnit(self, name, _mode):
    pidfile = self.stop_kills.get(str(name))
    if pidfile and os.path.exists(pidfile):
        pid = int(open(pidfile).read())
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(500):
                os.kill(pid, 0)
                time.sleep(0.01)
        except ProcessLookupError:
            pass
    return queue_job(self, str(name))


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='')
def Subscribe(_self):
    pass


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='o')
def GetUnit(_self, name):
    path = unit_path(str(name))
    if path not in mockobject.objects:
        raise dbus.exceptions.DBusException(f'Unit {name} not loaded.', name='org.freedesktop.systemd1.NoSuchUnit')
    return dbus.ObjectPath(path)


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='')
def Reboot(_self):
    pass
