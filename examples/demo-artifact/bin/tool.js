#!/usr/bin/env node
console.log('tool')
