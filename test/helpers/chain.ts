// A real local EVM node for tests: Anvil from npm, contracts compiled with solc-js and deployed with viem.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { createPublicClient, createWalletClient, defineChain, http, type Abi, type Address, type Hex, type PublicClient, type WalletClient, type Chain as ViemChain } from 'viem';
import { mnemonicToAccount, type HDAccount } from 'viem/accounts';

const ANVIL_BIN = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'anvil');
/** Anvil's well-known development mnemonic: its first accounts hold 10,000 ETH each. */
export const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';

export interface Anvil {
  rpcUrl: string;
  chain: ViemChain;
  publicClient: PublicClient;
  /** Account 0 of the Anvil mnemonic: deploys and mints. */
  deployer: HDAccount;
  walletClient: WalletClient;
  stop(): Promise<void>;
}

/** Starts Anvil on a free port (automine unless `args` say otherwise) and resolves once it listens. */
export async function startAnvil(options: { chainId?: number; args?: string[] } = {}): Promise<Anvil> {
  const chainId = options.chainId ?? 8453;
  // Its own process group, so stop() ends the npm wrapper and the native binary together.
  const child = spawn(ANVIL_BIN, ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(chainId), ...(options.args ?? [])], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const rpcUrl = await new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`anvil did not start: ${output.slice(-500)}`)), 15_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`anvil exited with ${code}: ${output.slice(-500)}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Listening on ([\d.]+:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(`http://${match[1]}`);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
  });
  child.stdout!.resume();
  // A crashed test run must not leave the node behind.
  const pid = child.pid!;
  process.once('exit', () => {
    if (child.exitCode === null) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  });
  const chain = defineChain({ id: chainId, name: `anvil-${chainId}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  const deployer = mnemonicToAccount(ANVIL_MNEMONIC);
  return {
    rpcUrl,
    chain,
    publicClient: createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 50, cacheTime: 0 }),
    deployer,
    walletClient: createWalletClient({ account: deployer, chain, transport: http(rpcUrl) }),
    stop: () => stopProcess(child),
  };
}

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    process.kill(-child.pid!, 'SIGTERM');
  });
}

/** An http:// URL on which nothing listens: an RPC that is down. */
export async function deadRpcUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const SOURCES: Record<string, string> = {
  // A 6-decimal ERC-20 with an open mint, standing in for USDC.
  'TestUSDC.sol': `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract TestUSDC {
    string public constant name = "USD Coin";
    string public constant symbol = "USDC";
    uint8 public constant decimals = 6;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }
    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }
    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }
    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "allowance");
        if (allowed != type(uint256).max) allowance[from][msg.sender] = allowed - value;
        _move(from, to, value);
        return true;
    }
    // As Circle's FiatToken: a blacklisted account can neither send nor receive (transfers to it revert).
    mapping(address => bool) public isBlacklisted;
    function blacklist(address account) external {
        isBlacklisted[account] = true;
    }
    function unBlacklist(address account) external {
        isBlacklisted[account] = false;
    }
    function _move(address from, address to, uint256 value) internal {
        require(!isBlacklisted[from] && !isBlacklisted[to], "Blacklistable: account is blacklisted");
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}`,
  // An EIP-1271 smart-contract wallet that accepts signatures of its owner key.
  'OwnedWallet.sol': `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
contract OwnedWallet {
    address public immutable owner;
    constructor(address owner_) { owner = owner_; }
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 32))
            v := byte(0, calldataload(add(signature.offset, 64)))
        }
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}`,
};

export interface Compiled {
  abi: Abi;
  bytecode: Hex;
}

let compiled: Record<string, Compiled> | null = null;

/** Compiles the test contracts once per process (solc-js, offline, evmVersion paris for Anvil and every L2). */
export function contracts(): Record<string, Compiled> {
  if (compiled) return compiled;
  const solc = createRequire(import.meta.url)('solc') as { compile(input: string): string };
  const input = {
    language: 'Solidity',
    sources: Object.fromEntries(Object.entries(SOURCES).map(([file, content]) => [file, { content }])),
    settings: { evmVersion: 'paris', optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: { severity: string; formattedMessage: string }[];
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  compiled = {};
  for (const file of Object.values(output.contracts)) {
    for (const [name, c] of Object.entries(file)) compiled[name] = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  }
  return compiled;
}

export async function deploy(anvil: Anvil, name: string, args: unknown[] = []): Promise<Address> {
  const { abi, bytecode } = contracts()[name];
  const hash = await anvil.walletClient.deployContract({ abi, bytecode, args, account: anvil.deployer, chain: anvil.chain });
  const receipt = await anvil.publicClient.waitForTransactionReceipt({ hash });
  if (!receipt.contractAddress) throw new Error(`${name} was not deployed`);
  return receipt.contractAddress;
}

export const deployTestUsdc = (anvil: Anvil): Promise<Address> => deploy(anvil, 'TestUSDC');

export const deployContractWallet = (anvil: Anvil, owner: Address): Promise<Address> => deploy(anvil, 'OwnedWallet', [owner]);

/** Mints test USDC (minor units, 6 decimals) and waits for the block. */
export async function mintUsdc(anvil: Anvil, token: Address, to: Address, amount: bigint): Promise<void> {
  const hash = await anvil.walletClient.writeContract({
    address: token, abi: contracts().TestUSDC.abi, functionName: 'mint', args: [to, amount], account: anvil.deployer, chain: anvil.chain,
  });
  await anvil.publicClient.waitForTransactionReceipt({ hash });
}
