import MediaRuntime
import NetworkIO
import SDP
import SIPDialog
import SIPMessage
import SIPRuntime
import SIPTransport

/// What ``Phone/networkChanged(to:port:timeout:)`` did.
public struct NetworkChange: Sendable {
    /// Where the phone listens (and sends from) now.
    public var address: SIPPeer
    /// The calls that followed the change: the peer accepted our re-INVITE with the new
    /// address; they are ``CallState/established(_:)`` again.
    public var reconnected: [Call]
    /// The calls that could not follow and ended with ``CallEndReason/networkChange``.
    public var lost: [Call]
}

extension Phone {
    /// Our address changed (the host moved to another network, an interface came up, a VPN
    /// started): the phone moves its SIP and media there and takes its calls and
    /// registrations along (Twilio's reconnecting and reconnected, libSoftphone's and
    /// Cloudonix's network-change handling).
    ///
    /// The phone listens at `ip`:`port` (0: any port) and sends from there; every account's
    /// registration moves its binding (one REGISTER adds the new Contact and removes the old);
    /// each established call goes to ``CallState/reconnecting``, gets a new media session bound
    /// to `ip`, and sends a re-INVITE with the new Contact and SDP address (RFC 3261
    /// §12.2.1.2, RFC 3264 §8). A call whose peer accepts is ``CallState/established(_:)``
    /// again; one that refuses or does not answer within `timeout` is hung up and ends
    /// ``CallEndReason/networkChange``. Then the old listen point closes. Calls not yet up when
    /// it happens keep their dialogs; their later requests carry the new Contact.
    /// - Throws: ``TransportError`` when `ip` is not an address or cannot be bound (nothing
    ///   has changed then).
    @discardableResult
    public func networkChanged(to ip: String, port: UInt16 = 0, timeout: Duration = .seconds(10)) async throws(TransportError) -> NetworkChange {
        let address: SocketAddress
        do { address = try SocketAddress(ip: ip, port: port) } catch { throw .invalidAddress(ip, reason: "\(error)") }
        let old = agent.endpoint.localAddress(agent.configuration.transport)
        let peer = try await agent.relocate(to: address)
        mediaAddress.withLock { $0 = address.ipString }
        agent.endpoint.logger.info("network changed: now at \(peer)")
        report("\(name): network changed: now at \(peer)")
        let live = calls.filter { $0.state.isEstablished }
        let outcomes = await withTaskGroup(of: (Call, Bool).self) { group in
            for call in live { group.addTask { (call, await self.reconnect(call, timeout: timeout)) } }
            var all: [(Call, Bool)] = []
            for await o in group { all.append(o) }
            return all
        }
        if let old, old.address != peer.address { agent.endpoint.removeListenPoint(old) }
        let byID = outcomes.sorted { $0.0.id < $1.0.id }
        let change = NetworkChange(address: peer, reconnected: byID.filter(\.1).map(\.0), lost: byID.filter { !$0.1 }.map(\.0))
        networkChanges.publish(change)
        return change
    }

    /// Every network change from now on (asked for with ``networkChanged(to:port:timeout:)``
    /// or made by the watch of ``watchNetwork(timeout:choose:)``), as it completes. Each access
    /// makes a new sequence; it finishes when the phone closes.
    public var networkChangeStream: AsyncStream<NetworkChange> { networkChanges.subscribe() }

    /// Watches the host's addresses and follows the network by itself: when the address the
    /// phone listens on goes away (an interface went down, the host roamed to another network,
    /// a VPN ended), `choose` picks where to go among the host's addresses now and the phone
    /// makes the change as ``networkChanged(to:port:timeout:)`` does (same port when it can be
    /// bound there, else any), publishing it on ``networkChangeStream``. With `choose`
    /// returning nil the phone stays (and logs it). A phone listening on the wildcard address
    /// never moves. Linux watches with a NETLINK_ROUTE socket; elsewhere this throws and the
    /// application reports changes itself (NWPathMonitor on Apple platforms).
    /// Watching again replaces the previous watch; ``close()`` stops it.
    /// - Throws: ``TransportError/system(_:)`` when the host offers no way to watch.
    public func watchNetwork(timeout: Duration = .seconds(10),
                             choose: @escaping @Sendable (_ current: String, _ addresses: [HostAddress]) -> String? = HostAddress.replacement(for:among:))
        throws(TransportError)
    {
        let watcher = try NetworkWatcher { [weak self] in await self?.addressesChanged(timeout: timeout, choose: choose) }
        networkWatcher.withLock { w in
            w?.stop()
            w = watcher
        }
    }

    /// Stops the watch of ``watchNetwork(timeout:choose:)``.
    public func stopWatchingNetwork() {
        networkWatcher.withLock { w in w?.stop(); w = nil }
    }

    /// The host's addresses changed: moves when ours is gone.
    private func addressesChanged(timeout: Duration, choose: @Sendable (String, [HostAddress]) -> String?) async {
        guard let here = agent.endpoint.localAddress(agent.configuration.transport) ?? agent.endpoint.localAddresses.first,
              !here.address.isWildcard else { return }
        let current = here.address.ipString
        let addresses: [HostAddress]
        do { addresses = try HostAddress.current() } catch {
            agent.endpoint.logger.warning("network watch: cannot list the host's addresses: \(error)")
            return
        }
        guard !addresses.contains(where: { $0.address == current }) else { return }
        guard let next = choose(current, addresses) else {
            agent.endpoint.logger.warning("network watch: \(current) is gone and there is no other address to go to")
            report("\(name): network lost (\(current) is gone)")
            return
        }
        agent.endpoint.logger.info("network watch: \(current) is gone, moving to \(next)")
        do {
            try await networkChanged(to: next, port: here.address.port, timeout: timeout)
        } catch {
            do {
                try await networkChanged(to: next, port: 0, timeout: timeout)
            } catch {
                agent.endpoint.logger.warning("network watch: cannot move to \(next): \(error)")
            }
        }
    }

    /// Moves one established call to the new address: new media, re-INVITE, and either back
    /// to established or a BYE. Returns whether it followed.
    private func reconnect(_ call: Call, timeout: Duration) async -> Bool {
        let key = call.key
        call.noteReconnecting(true)
        let log = agent.logger(for: key)
        await waitUntilCanOffer(key, within: .seconds(1))
        // New media on the new address (the old socket may be gone with the old network).
        let owner = MediaOwner()
        owner.key.withLock { $0 = key }
        let fresh = media(key) == nil ? nil : newMedia(owner: owner)
        if let fresh {
            fresh.setMuted(call.isMuted)
            let old = mediaSessions.withLock { m -> MediaSession? in
                let o = m[key]
                m[key] = fresh
                return o
            }
            if let old {
                // Stopped first: its figures are final then (a packet it took between a snapshot
                // and its stop would be lost from the call's).
                old.stop()
                retireMedia(key, old)
            }
        }
        let address = mediaAddress.withLock { $0 } ?? agent.endpoint.localAddresses.first?.address.ipString ?? Phone.noAddress
        let offer = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in
            var caps = e.capabilities
            caps.address = address
            caps.addressType = address.contains(":") ? .ip6 : .ip4
            if let fresh { caps.streams = [fresh.streamCapabilities()] }
            e.capabilities = caps
            return try e.makeOffer()
        }
        guard case .success(let sdp) = offer else {
            log.warning("network change: no offer could be made")
            return await lose(call)
        }
        let finals = completions.subscribe()
        do throws(SessionError) {
            try await agent.perform(key) { s throws(SessionError) in try s.reinvite(body: .sdp(sdp.serialized())) }
        } catch {
            _ = withEngine(key) { (e: inout OfferAnswer) throws(OfferAnswerError) in e.rollback() }
            log.warning("network change: re-INVITE not sent: \(error)")
            return await lose(call)
        }
        let status: Int? = await within(timeout) {
            for await (k, method, status) in finals where k == key && method == .invite { return status }
            return nil
        }
        if let status, (200..<300).contains(status) {
            call.noteReconnecting(false)
            log.info("network change: the call followed")
            return true
        }
        log.info("network change: the re-INVITE got \(status.map(String.init) ?? "no answer"): hanging up")
        return await lose(call)
    }

    /// Ends a call that could not follow the change, as ``CallEndReason/networkChange``.
    private func lose(_ call: Call) async -> Bool {
        call.willEnd(.networkChange)
        await call.hangUp(timeout: .seconds(5))
        return false
    }
}
