'''A test double of logind's manager (org.freedesktop.login1) for hoist's
integration tests, on a python-dbusmock object.

Parameters (JSON, dbusmock -p):
  legacy:        true: RebootWithFlags answers UnknownMethod (logind before v248)
  blocked_calls: how many reboot requests an inhibitor blocks (-1: all of them)
  blocked_error: the error of a blocked request: "BlockedByInhibitorLock"
                 (logind v256+, the default) or "AccessDenied" (older logind)
  refuse:        an error name every reboot request fails with
  inhibitors:    ListInhibitors' answer, [[what, who, why, mode, uid, pid]]

An accepted request does nothing: the test plays the host going down (SIGTERM).
'''

import dbus

BUS_NAME = 'org.freedesktop.login1'
MAIN_OBJ = '/org/freedesktop/login1'
MAIN_IFACE = 'org.freedesktop.login1.Manager'
SYSTEM_BUS = True


def load(mock, parameters):
    mock.legacy = bool(parameters.get('legacy', False))
    mock.blocked_calls = int(parameters.get('blocked_calls', 0))
    mock.blocked_error = parameters.get('blocked_error', 'BlockedByInhibitorLock')
    mock.refuse = parameters.get('refuse', '')
    mock.inhibitors = [tuple(i) for i in parameters.get('inhibitors', [])]


def request(self):
    if self.refuse:
        raise dbus.exceptions.DBusException('refused by the test', name=self.refuse)
    if self.blocked_calls != 0:
        if self.blocked_calls > 0:
            self.blocked_calls -= 1
        if self.blocked_error == 'AccessDenied':
            raise dbus.exceptions.DBusException('Access denied to root due to active block inhibitor',
                                                name='org.freedesktop.DBus.Error.AccessDenied')
        raise dbus.exceptions.DBusException('Operation denied due to active block inhibitor',
                                            name='org.freedesktop.login1.BlockedByInhibitorLock')


@dbus.service.method(MAIN_IFACE, in_signature='t', out_signature='')
def RebootWithFlags(self, _flags):
    if self.legacy:
        raise dbus.exceptions.DBusException('Unknown method RebootWithFlags',
                                            name='org.freedesktop.DBus.Error.UnknownMethod')
    request(self)


@dbus.service.method(MAIN_IFACE, in_signature='b', out_signature='')
def Reboot(self, _interactive):
    request(self)


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='a(ssssuu)')
def ListInhibitors(self):
    return dbus.Array([dbus.Struct((str(w), str(who), str(why), str(m), dbus.UInt32(u), dbus.UInt32(p)))
                       for (w, who, why, m, u, p) in self.inhibitors], signature='(ssssuu)')
