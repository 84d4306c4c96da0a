// The built site (scripts/docs) checked as a reader's browser sees it: Debian's chromium, headless,
// driven by puppeteer-core (no browser of its own), the site served over HTTP on loopback.
//   node check_site.cjs SITE_DIR SCREENSHOT_DIR
// Fails (exit 1), naming each problem, if a page of the book or an API reference's front page
// logs a console error, throws, or fails to load something; if an internal link of the book
// names a missing file or a missing anchor; or if the search box does not find "fencing".
// Screenshots: SCREENSHOT_DIR/front.png (the front page) and search-fencing.png.
'use strict'
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const puppeteer = require('puppeteer-core')

const [site, shots] = process.argv.slice(2).map((p) => path.resolve(p))
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.svg': 'image/svg+xml', '.png': 'image/png', '.woff': 'font/woff', '.woff2': 'font/woff2', '.ttf': 'font/ttf', '.ico': 'image/x-icon' }
const problems = []

function walk (dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) walk(p, out)
    else out.push(p)
  }
  return out
}

// The anchors of an HTML file (its id and name attributes), read once.
const anchorsOf = new Map()
function anchors (file) {
  if (!anchorsOf.has(file)) {
    const text = fs.readFileSync(file, 'utf8')
    anchorsOf.set(file, new Set([...text.matchAll(/\s(?:id|name)="([^"]+)"/g)].map((m) => m[1])))
  }
  return anchorsOf.get(file)
}

async function main () {
  const server = http.createServer((req, res) => {
    let p = decodeURIComponent(new URL(req.url, 'http://x').pathname)
    if (p.endsWith('/')) p += 'index.html'
    const file = path.join(site, p)
    if (!file.startsWith(site) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404); res.end('not found'); return
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' })
    fs.createReadStream(file).pipe(res)
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${server.address().port}`
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']
  })
  try {
    const book = walk(site).filter((f) => f.endsWith('.html') && !path.relative(site, f).startsWith('api' + path.sep))
    const apiFronts = ['api/c.html', 'api/python/zklock.html', 'api/node/index.html', 'api/rust/zklock/index.html']
      .filter((p) => fs.existsSync(path.join(site, p)))
    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 900 })
    let current = ''
    page.on('console', (msg) => {
      if (msg.type() === 'error' && !(msg.location()?.url && probe(msg.location().url))) problems.push(`${current}: console error: ${msg.text()}`)
    })
    page.on('pageerror', (err) => problems.push(`${current}: uncaught: ${err.message}`))
    page.on('requestfailed', (req) => problems.push(`${current}: failed to load ${req.url()}: ${req.failure()?.errorText}`))
    // (A page without an icon of its own makes Chromium ask for /favicon.ico: not the site's link.)
    const probe = (url) => new URL(url).pathname === '/favicon.ico'
    page.on('response', (res) => { if (res.status() >= 400 && !probe(res.url())) problems.push(`${current}: ${res.status()} for ${res.url()}`) })
    let links = 0
    for (const file of [...book, ...apiFronts.map((p) => path.join(site, p))]) {
      const rel = path.relative(site, file)
      current = rel
      await page.goto(`${base}/${rel}`, { waitUntil: 'networkidle0' })
      if (!book.includes(file)) continue
      // Every internal link of the book: its file exists, and so does its anchor.
      const hrefs = await page.$$eval('a[href]', (as) => as.map((a) => a.getAttribute('href')))
      for (const href of hrefs) {
        if (/^[a-z]+:/i.test(href) || href.startsWith('//')) continue
        links++
        const [target, anchor] = href.split('#')
        // A link to a file of the repository (ARCHITECTURE.md's to core/src/..., say) is not a
        // page of the site: only pages, directories and their anchors are checked.
        if (target && /\.[a-z0-9]+$/i.test(target) && !/\.html?$/i.test(target)) continue
        let dest = target ? path.resolve(path.dirname(file), decodeURIComponent(target)) : file
        if (fs.existsSync(dest) && fs.statSync(dest).isDirectory()) dest = path.join(dest, 'index.html')
        if (!fs.existsSync(dest)) { problems.push(`${rel}: link to ${href}: no such file`); continue }
        if (anchor && dest.endsWith('.html') && !anchors(dest).has(decodeURIComponent(anchor))) {
          problems.push(`${rel}: link to ${href}: no such anchor`)
        }
      }
    }
    // The front page, then the search box.
    current = 'index.html (search)'
    await page.goto(`${base}/index.html`, { waitUntil: 'networkidle0' })
    fs.mkdirSync(shots, { recursive: true })
    await page.screenshot({ path: path.join(shots, 'front.png') })
    await page.click('#search-toggle')
    await page.type('#searchbar', 'fencing')
    let found = 0
    try {
      await page.waitForFunction(() => document.querySelectorAll('#searchresults li').length > 0, { timeout: 10000 })
      found = await page.$$eval('#searchresults li', (li) => li.length)
    } catch {}
    await page.screenshot({ path: path.join(shots, 'search-fencing.png') })
    if (!found) problems.push('search: "fencing" found nothing')
    console.log(`check_site: ${book.length} book pages and ${apiFronts.length} API front pages loaded, ${links} internal links checked, search "fencing": ${found} results`)
    console.log(`check_site: screenshots in ${shots}`)
  } finally {
    await browser.close()
    server.close()
  }
  for (const p of problems) console.log(`PROBLEM ${p}`)
  process.exit(problems.length ? 1 : 0)
}

main().catch((err) => { console.error(err); process.exit(1) })
